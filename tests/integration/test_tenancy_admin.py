"""Admin API round trips against a real fleet (SPEC §6): squads, keys, settings, BYOK, endpoints, operator."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from support.gateway import Gateway
from support.procs import Fleet
from support.tenancy import (
    ACME_ADMIN,
    ACME_USER,
    BETA_ENDPOINT_KEY,
    OPERATOR,
    Admin,
    chat,
    fp,
    sim_entries,
    start_tenancy,
    tenancy_env,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return tenancy_env()


@pytest.fixture(scope="module")
def gw(env: dict[str, str]) -> Iterator[Gateway]:
    fleet = Fleet()
    try:
        gateway = start_tenancy(fleet, env)
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture
def acme(gw: Gateway) -> Admin:
    return Admin(gw.base_url, ACME_ADMIN)


@pytest.fixture
def operator(gw: Gateway) -> Admin:
    return Admin(gw.base_url, OPERATOR)


def unknown_key_body(gw: Gateway) -> object:
    response = chat(gw.base_url, "tk-never-issued-000000000000", "t-ok")
    assert response.status_code == 401
    return response.json()


def test_squad_and_key_round_trip_with_the_secret_shown_once(gw: Gateway, acme: Admin) -> None:
    created = acme.call(
        "POST",
        "/orgs/acme/squads",
        {"name": "rt-squad", "settings": {"policy": {"budget": {"max_attempts": 99}, "retry": {"max_retries": 2}}}},
    )
    assert created.status_code == 201, created.text
    assert created.json()["clamped"] == [{"path": "settings.policy.budget.max_attempts", "requested": 99, "applied": 6}]
    made = acme.call("POST", "/orgs/acme/keys", {"name": "rt-key", "squad": "rt-squad"})
    assert made.status_code == 201, made.text
    secret = made.json()["secret"]
    assert secret.startswith("tk-") and len(secret) >= 3 + 22  # >= 128 bits of entropy
    assert made.json()["key"]["prefix"] == secret[:11] + "…"
    listed = acme.call("GET", "/orgs/acme/keys")
    assert secret not in listed.text and "rt-key" in listed.text
    assert secret not in acme.call("GET", "/orgs/acme/keys/rt-key").text
    effective = acme.call("GET", "/orgs/acme/keys/rt-key/effective").json()
    assert effective["policy"]["budget"]["max_attempts"] == 6 and effective["policy"]["retry"]["max_retries"] == 2
    response = chat(gw.base_url, secret, "t-ok")
    assert response.status_code == 200, response.text
    squad = acme.call("GET", "/orgs/acme/squads/rt-squad").json()["squad"]
    assert squad["keys"] == ["rt-key"]
    assert acme.call("DELETE", "/orgs/acme/squads/rt-squad").status_code == 409


def test_settings_put_patch_and_inherit_reach_the_worker(gw: Gateway, acme: Admin) -> None:
    secret = acme.call("POST", "/orgs/acme/keys", {"name": "st-key"}).json()["secret"]
    assert chat(gw.base_url, secret, "t-ok").headers["x-turnout-model"] == "t-ok"
    patched = acme.call("PATCH", "/orgs/acme/keys/st-key/settings", {"reroutes": ["t-other"]})
    assert patched.status_code == 200 and patched.json()["settings"] == {"reroutes": ["t-other"]}
    routed = chat(gw.base_url, secret, "t-ok")
    assert routed.headers["x-turnout-model"] == "t-other" and routed.headers["x-turnout-reroute"] == "1"
    put = acme.call("PUT", "/orgs/acme/settings", {"reroutes": ["t-alt"]})  # org over key
    assert put.status_code == 200, put.text
    assert chat(gw.base_url, secret, "t-ok").headers["x-turnout-model"] == "t-alt"
    back = acme.call("PATCH", "/orgs/acme/settings", {"reroutes": None})
    assert "reroutes" in back.json()["inherit"]
    assert chat(gw.base_url, secret, "t-ok").headers["x-turnout-model"] == "t-other"


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"fallbacks": {"t-ok": ["t-alt"], "t-alt": ["t-ok"]}}, "settings.fallbacks", "fallback cycle"),
        ({"reroutes": ["custom:beta-ep"]}, "settings.reroutes[0]", "malformed entry"),
        ({"reroutes": ["custom:beta-ep:m"]}, "settings.reroutes[0]", "names no custom endpoint"),
        ({"fallbacks": ["gpt-99"]}, "settings.fallbacks[0]", "unknown model"),
        (
            {"policy": {"retry": {"max_retries": "many"}}},
            "settings.policy.retry.max_retries",
            "Expected a whole number, got text",
        ),
        ({"key_mode": "byok"}, "settings.key_mode", "Invalid enum value"),
        ({"strategies": {}}, "settings.strategies", "unknown setting"),
        ({"policy": {"retry": {"max_retries": -1}}}, "settings.policy.retry.max_retries", "Expected `int` >= 0"),
        ({"policy": {"budget": {"max_attempts": 0}}}, "settings.policy.budget.max_attempts", "Expected `int` >= 1"),
    ],
    ids=[
        "cycle",
        "malformed-custom",
        "other-orgs-endpoint",
        "unknown-model",
        "policy-type",
        "key-mode",
        "unknown",
        "negative-retries",
        "no-attempts",
    ],
)
def test_refused_settings_name_the_path_and_change_nothing(acme: Admin, body: object, param: str, words: str) -> None:
    before = acme.call("GET", "/orgs/acme/settings").json()
    refused = acme.call("PATCH", "/orgs/acme/settings", body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param and words in error["message"]
    assert acme.call("GET", "/orgs/acme/settings").json() == before


def test_a_number_out_of_range_is_refused_naming_its_field(acme: Admin) -> None:
    before = acme.call("GET", "/orgs/acme/settings").json()
    body = b'{"budget": {"usd": 1e309, "period": "day"}}'
    for method in ("PATCH", "PUT"):
        refused = acme.call(method, "/orgs/acme/settings", content=body)
        assert refused.status_code == 400, refused.text
        assert refused.json() == {
            "error": {
                "message": "settings.budget.usd: Number out of range (1e309)",
                "type": "invalid_request_error",
                "param": "settings.budget.usd",
                "code": "invalid_value",
            }
        }
    assert acme.call("GET", "/orgs/acme/settings").json() == before


def test_empty_or_extra_bodies_are_refused_saying_what_the_route_takes(acme: Admin) -> None:
    acme.call("POST", "/orgs/acme/keys", {"name": "lc-bodies"})
    empty_patch = acme.call("PATCH", "/orgs/acme/keys/lc-bodies", content=b"")
    assert empty_patch.status_code == 400 and empty_patch.json()["error"]["message"] == (
        "The request body is empty; send a JSON object of the fields to change (`squad`, `admin`, `expires_at`)."
    )
    past = acme.call("PATCH", "/orgs/acme/keys/lc-bodies", {"expires_at": "2000-01-01T00:00:00Z"})
    assert past.status_code == 400 and past.json()["error"]["param"] == "expires_at", past.text
    settings = acme.call("PATCH", "/orgs/acme/settings", content=b"")
    assert settings.json()["error"]["message"] == (
        "The request body is empty; send a JSON object of the settings to change."
    ), "`{}` in a PATCH changes nothing: it is not offered as the way to inherit"
    extra = acme.call("POST", "/orgs/acme/keys/lc-bodies/revoke", {"x": 1})
    assert extra.status_code == 400 and extra.json()["error"]["param"] == "x", extra.text
    assert acme.call("GET", "/orgs/acme/keys/lc-bodies").json()["key"]["status"] == "active", "nothing changed"
    no_bodies: tuple[dict[str, object] | None, ...] = ({}, None)
    for no_body in no_bodies:
        revoked = acme.call("POST", "/orgs/acme/keys/lc-bodies/revoke", no_body)
        assert revoked.status_code == 200 and revoked.json()["key"]["status"] == "revoked", revoked.text


def test_revoked_expired_and_unknown_keys_get_the_same_401(gw: Gateway, acme: Admin) -> None:
    expected = unknown_key_body(gw)
    revoked = acme.call("POST", "/orgs/acme/keys", {"name": "lc-revoked"}).json()["secret"]
    expiring = acme.call("POST", "/orgs/acme/keys", {"name": "lc-expiring", "ttl_s": 1}).json()["secret"]
    deleted = acme.call("POST", "/orgs/acme/keys", {"name": "lc-deleted"}).json()["secret"]
    for secret in (revoked, expiring, deleted):
        assert chat(gw.base_url, secret, "t-ok").status_code == 200
    assert acme.call("POST", "/orgs/acme/keys/lc-revoked/revoke").json()["key"]["status"] == "revoked"
    assert acme.call("DELETE", "/orgs/acme/keys/lc-deleted").status_code == 200
    wait_for(lambda: chat(gw.base_url, expiring, "t-ok").status_code == 401, 3, "expiry")
    for secret in (revoked, expiring, deleted):
        response = chat(gw.base_url, secret, "t-ok")
        assert response.status_code == 401 and response.json() == expected
    assert acme.call("GET", "/orgs/acme/keys/lc-expiring").json()["key"]["status"] == "expired"


def test_revocation_and_new_keys_reach_another_ingress_within_the_bound(
    gw: Gateway, acme: Admin, env: dict[str, str]
) -> None:
    config_path = gw.fleet.workdir / "turnout.yaml"
    other_proc, other = gw.fleet.ingress(config_path, gw.redis_url, env=env)
    try:
        secret = acme.call("POST", "/orgs/acme/keys", {"name": "fleet-key"}).json()["secret"]
        took = wait_for(lambda: chat(other, secret, "t-ok").status_code == 200, 2.0, "new key on the other ingress")
        assert took < 2.0
        acme.call("POST", "/orgs/acme/keys/fleet-key/revoke")
        took = wait_for(lambda: chat(other, secret, "t-ok").status_code == 401, 2.0, "revocation on the other ingress")
        assert took < 2.0
    finally:
        other_proc.stop()


def test_byok_key_and_endpoint_reads_are_masked(gw: Gateway, acme: Admin) -> None:
    put = acme.call("PUT", "/orgs/acme/provider-keys/sim-b", {"api_key": "own-b-key-0000000000wxyz"})
    assert put.status_code == 200, put.text
    assert put.json()["provider_key"]["api_key"] == "…wxyz"
    listed = acme.call("GET", "/orgs/acme/provider-keys").json()["provider_keys"]
    assert {p["provider"]: p["api_key"] for p in listed}["sim-b"] == "…wxyz"
    assert "own-b-key-0000000000wxyz" not in acme.call("GET", "/orgs/acme").text
    unknown = acme.call("PUT", "/orgs/acme/provider-keys/nope", {"api_key": "x" * 20})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "provider_keys.nope"
    assert acme.call("DELETE", "/orgs/acme/provider-keys/sim-b").status_code == 200


def test_custom_endpoint_becomes_routable_with_its_own_key_only(gw: Gateway, acme: Admin) -> None:
    registered = acme.call(
        "PUT",
        "/orgs/acme/custom-endpoints/acme-ep",
        {"base_url": f"{gw.sim_url}/v1", "api_key": "acme-endpoint-key-0001"},
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["custom_endpoint"]["api_key"] == "…0001"
    secret = acme.call(
        "POST", "/orgs/acme/keys", {"name": "ep-key", "settings": {"reroutes": ["custom:acme-ep:cust-llama"]}}
    ).json()["secret"]
    response = chat(gw.base_url, secret, "t-ok")
    assert response.status_code == 200, response.text
    assert response.headers["x-turnout-provider"] == "custom:acme:acme-ep"
    assert response.headers["x-turnout-model"] == "cust-llama"
    entries = sim_entries(gw, response.headers["x-request-id"])
    assert [(e["model"], e["auth_fingerprint"]) for e in entries] == [("cust-llama", fp("acme-endpoint-key-0001"))]
    used = acme.call("DELETE", "/orgs/acme/custom-endpoints/acme-ep")
    assert used.status_code == 409 and used.json()["error"]["param"] == "keys.ep-key.settings.reroutes"


def test_operator_creates_orgs_and_org_admins_stay_in_theirs(gw: Gateway, acme: Admin, operator: Admin) -> None:
    assert acme.call("POST", "/orgs", {"id": "gamma"}).status_code == 403
    created = operator.call("POST", "/orgs", {"id": "gamma", "settings": {"key_mode": "shared_only"}})
    assert created.status_code == 201, created.text
    assert operator.call("POST", "/orgs", {"id": "gamma"}).status_code == 409
    admin = operator.call("POST", "/orgs/gamma/keys", {"name": "admin", "admin": True}).json()["secret"]
    gamma = Admin(gw.base_url, admin)
    assert [o["id"] for o in gamma.call("GET", "/orgs").json()["orgs"]] == ["gamma"]
    assert {"acme", "beta", "gamma"} <= {o["id"] for o in operator.call("GET", "/orgs").json()["orgs"]}
    assert gamma.call("GET", "/orgs/acme").status_code == 404
    user = gamma.call("POST", "/orgs/gamma/keys", {"name": "user"}).json()["secret"]
    assert chat(gw.base_url, user, "t-ok").status_code == 200
    assert Admin(gw.base_url, ACME_USER).call("GET", "/orgs/acme").status_code == 403
    assert httpx.get(f"{gw.base_url}/admin/v1/orgs/acme").status_code == 401
    assert operator.call("DELETE", "/orgs/gamma").status_code == 200
    wait_for(lambda: chat(gw.base_url, user, "t-ok").status_code == 401, 2.0, "deleted org's keys")


def test_run_time_edits_survive_an_ingress_restart(gw: Gateway, acme: Admin, env: dict[str, str]) -> None:
    acme.call("POST", "/orgs/acme/squads", {"name": "survivor"})
    acme.call("PATCH", "/orgs/acme/squads/research/settings", {"fallbacks": ["t-ok"]})
    config_path = gw.fleet.workdir / "turnout.yaml"
    proc, base = gw.fleet.ingress(config_path, gw.redis_url, env=env)  # bootstraps again from the file
    try:
        fresh = Admin(base, ACME_ADMIN)
        squads = {s["name"]: s for s in fresh.call("GET", "/orgs/acme/squads").json()["squads"]}
        assert "survivor" in squads
        assert squads["research"]["settings"] == {"fallbacks": ["t-ok"]}  # the api edit, not the file's [t-alt]
    finally:
        proc.stop()


def test_beta_file_endpoint_serves_with_its_sealed_key(gw: Gateway) -> None:
    beta = Admin(gw.base_url, "tk-beta-admin-00000000001")
    secret = beta.call(
        "POST",
        "/orgs/beta/keys",
        {"name": "ep-user", "settings": {"fallbacks": {"t-fail": ["custom:beta-ep:beta-model"]}}},
    ).json()["secret"]
    response = chat(gw.base_url, secret, "t-fail")
    assert response.status_code == 200, response.text
    assert response.headers["x-turnout-fallback"] == "1"
    entries = sim_entries(gw, response.headers["x-request-id"])
    assert entries[-1]["model"] == "beta-model" and entries[-1]["auth_fingerprint"] == fp(BETA_ENDPOINT_KEY)


def test_unfit_tenant_strings_are_refused_with_the_path_named(gw: Gateway, acme: Admin) -> None:
    assert acme.call("PUT", "/orgs/acme/custom-endpoints/ep-text", {"base_url": f"{gw.sim_url}/v1"}).is_success
    refusals = [
        (
            acme.call("PATCH", "/orgs/acme/keys/user/settings", {"reroutes": ["custom:ep-text:m\r\nX-Evil: 1"]}),
            "keys.user.settings.reroutes[0]",
        ),
        (
            acme.call("PUT", "/orgs/acme/settings", {"fallbacks": ["custom:ep-text:" + "m" * 300]}),
            "settings.fallbacks[0]",
        ),
        (acme.call("PUT", "/orgs/acme/provider-keys/sim-a", {"api_key": "sk-x\r\nX-Evil: 1"}), "api_key"),
        (
            acme.call(
                "PUT", "/orgs/acme/custom-endpoints/ep-text", {"base_url": f"{gw.sim_url}/v1", "api_key": "k\n1"}
            ),
            "api_key",
        ),
        (acme.call("POST", "/orgs/acme/keys", {"name": "a\nb"}), "name"),
    ]
    for response, path in refusals:
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == path and "X-Evil" not in response.text
    assert chat(gw.base_url, ACME_USER, "t-ok").status_code == 200  # nothing was stored
    acme.call("DELETE", "/orgs/acme/custom-endpoints/ep-text")


def test_a_base_url_carrying_a_secret_is_refused_with_where_to_put_it(gw: Gateway, acme: Admin) -> None:
    for url in (f"{gw.sim_url}/v1?key=leaky-secret-0001", f"{gw.sim_url}/v1?api-version=1&token=leaky-secret-0001"):
        response = acme.call("PUT", "/orgs/acme/custom-endpoints/leaky", {"base_url": url})
        assert response.status_code == 400 and response.json()["error"]["param"] == "base_url"
        assert "api_key field" in response.text and "leaky-secret-0001" not in response.text
    assert acme.call("GET", "/orgs/acme/custom-endpoints/leaky").status_code == 404


def test_an_org_deleted_and_created_again_starts_clean(gw: Gateway, operator: Admin) -> None:
    """Its predecessor's records, spend and Idempotency-Key bindings are not the new org's."""

    def born() -> str:
        assert operator.call("POST", "/orgs", {"id": "reborn"}).status_code == 201
        made = operator.call("POST", "/orgs/reborn/keys", {"name": "main", "admin": True})
        assert made.status_code == 201, made.text
        secret: str = made.json()["secret"]
        wait_for(lambda: chat(gw.base_url, secret, "t-ok").status_code == 200, 10, "the new key to be loaded")
        return secret

    def priced(secret: str) -> httpx.Response:
        return httpx.post(
            f"{gw.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {secret}", "idempotency-key": "reborn-1"},
            json={"model": "t-priced", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
            timeout=30,
        )

    first = born()
    assert priced(first).status_code == 200
    old = Admin(gw.base_url, first)
    wait_for(lambda: old.call("GET", "/orgs/reborn/spend").json()["spend"]["total_usd"] > 0, 10, "the spend")
    wait_for(lambda: "t-priced" in old.call("GET", "/logs/export").text, 10, "the records")
    assert operator.call("DELETE", "/orgs/reborn").status_code == 200

    second = born()
    new = Admin(gw.base_url, second)
    spend = new.call("GET", "/orgs/reborn/spend").json()["spend"]
    assert (spend["total_usd"], spend["squads"], spend["keys"]) == (0.0, {}, {})
    assert "t-priced" not in new.call("GET", "/logs/export").text  # the old org's rows are not this org's
    again = priced(second)
    assert again.status_code == 200 and "x-turnout-idempotent-replay" not in again.headers  # run anew, not replayed
