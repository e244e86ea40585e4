"""BYOK end to end (SPEC §6): which credential each upstream call carried, per key_mode, counted by the simulator.

Org `acme` has its own key for `sim-a` (the canary, from the file) and, added
here, for `sim-noshared` (which has no platform key). The simulator logs the
fingerprint of every Authorization header; `fp(key)` computes the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from support.gateway import Gateway
from support.procs import Fleet
from support.tenancy import (
    ACME_ADMIN,
    CANARY,
    SHARED_A,
    SHARED_B,
    Admin,
    chat,
    fp,
    sim_entries,
    start_tenancy,
    wait_for,
)

pytestmark = pytest.mark.integration

OWN_NS = "own-noshared-key-00000001"
MODES = ("own_then_shared", "own_only", "shared_only")


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    fleet = Fleet()
    try:
        gateway = start_tenancy(fleet)
        admin = Admin(gateway.base_url, ACME_ADMIN)
        assert admin.call("PUT", "/orgs/acme/provider-keys/sim-noshared", {"api_key": OWN_NS}).status_code == 200
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture(scope="module")
def keys(gw: Gateway) -> dict[str, str]:
    """One gateway key per key_mode (set on the key; the org leaves key_mode on inherit)."""
    admin = Admin(gw.base_url, ACME_ADMIN)
    out = {}
    for mode in MODES:
        made = admin.call("POST", "/orgs/acme/keys", {"name": f"mode-{mode}", "settings": {"key_mode": mode}})
        assert made.status_code == 201, made.text
        out[mode] = made.json()["secret"]
    return out


# model -> expected [(upstream model, credential)] per mode; None = refused before any upstream call
MATRIX: dict[str, dict[str, list[tuple[str, str]] | None]] = {
    "bk-a": {
        "own_then_shared": [("bk-a", CANARY)],
        "own_only": [("bk-a", CANARY)],
        "shared_only": [("bk-a", SHARED_A)],
    },
    "bk-b": {  # the tenant has no key for any provider of the model: the shared key serves in every mode
        "own_then_shared": [("bk-b", SHARED_B)],
        "own_only": [("bk-b", SHARED_B)],
        "shared_only": [("bk-b", SHARED_B)],
    },
    "bk-ab": {  # priority: sim-b first; own_only makes only sim-a (the tenant's provider) eligible
        "own_then_shared": [("bkab-b", SHARED_B)],
        "own_only": [("bkab-a", CANARY)],
        "shared_only": [("bkab-b", SHARED_B)],
    },
    "bk-noshared": {  # no platform key for this provider
        "own_then_shared": [("bk-ns", OWN_NS)],
        "own_only": [("bk-ns", OWN_NS)],
        "shared_only": None,
    },
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", sorted(MATRIX))
def test_byok_mode_matrix(gw: Gateway, keys: dict[str, str], model: str, mode: str) -> None:
    response = chat(gw.base_url, keys[mode], model)
    expected = MATRIX[model][mode]
    entries = sim_entries(gw, response.headers["x-request-id"])
    if expected is None:
        assert response.status_code == 502, response.text
        assert "No target had a usable credential" in response.json()["error"]["message"]
        assert entries == []
        return
    assert response.status_code == 200, response.text
    assert [(e["model"], e["auth_fingerprint"]) for e in entries] == [(m, fp(k)) for m, k in expected]
    assert response.headers["x-turnout-byok-fallback"] == "0"
    assert response.headers["x-turnout-fallback"] == "0"  # an offer no credential reaches is not in the plan
    assert response.headers["x-turnout-attempts"] == "1"


@pytest.mark.parametrize(
    ("mode", "model", "provider", "status", "served"),
    [
        ("own_only", "bk-ab", {"allow_fallbacks": False}, 200, "bkab-a"),  # first usable, not first configured
        ("own_only", "bk-ab", {"order": ["sim-b"]}, 200, "bkab-a"),
        ("own_only", "bk-ab", {"only": ["sim-b"]}, 400, None),  # only an offer the org has no key for
        ("shared_only", "bk-noshared", {"allow_fallbacks": False}, 400, None),
        ("own_then_shared", "bk-ab", {"only": ["sim-b"]}, 200, "bkab-b"),
    ],
)
def test_preferences_choose_among_the_offers_a_credential_reaches(
    gw: Gateway, keys: dict[str, str], mode: str, model: str, provider: dict[str, Any], status: int, served: str | None
) -> None:
    response = chat(gw.base_url, keys[mode], model, provider=provider)
    assert response.status_code == status, response.text
    entries = sim_entries(gw, response.headers["x-request-id"])
    if served is None:
        assert response.json()["error"]["code"] == "no_matching_offer"
        assert response.json()["error"]["param"] == "provider"
        assert entries == []
        return
    assert [e["model"] for e in entries] == [served]
    assert response.headers["x-turnout-fallback"] == "0"


def test_tenant_keys_only_ever_reached_their_own_provider(gw: Gateway, keys: dict[str, str]) -> None:
    for mode in MODES:
        for model in MATRIX:
            chat(gw.base_url, keys[mode], model)
    entries = httpx.get(f"{gw.sim_url}/sim/log").json()
    own_a, own_ns = fp(CANARY), fp(OWN_NS)
    for entry in entries:
        if entry["auth_fingerprint"] == own_a:
            assert entry["model"] in {"bk-a", "bkab-a"} or entry["model"].startswith("bkfb")  # sim-a models only
        if entry["auth_fingerprint"] == own_ns:
            assert entry["model"] == "bk-ns"
        if entry["model"] in {"bk-b", "bkab-b"}:
            assert entry["auth_fingerprint"] == fp(SHARED_B)


def test_rejected_own_key_falls_back_once_to_the_shared_key_flagged(gw: Gateway, keys: dict[str, str]) -> None:
    response = chat(gw.base_url, keys["own_then_shared"], "bk-fb1")
    assert response.status_code == 200, response.text
    assert response.headers["x-turnout-byok-fallback"] == "1"
    assert response.headers["x-turnout-attempts"] == "2"
    rid = response.headers["x-request-id"]
    entries = sim_entries(gw, rid)
    assert [(e["status"], e["auth_fingerprint"]) for e in entries] == [(401, fp(CANARY)), (200, fp(SHARED_A))]
    admin = Admin(gw.base_url, ACME_ADMIN)

    def rows() -> list[dict[str, object]]:
        text = admin.call("GET", "/logs/export", params={"format": "jsonl"}).text
        return [row for row in map(json.loads, text.splitlines()) if row["request_id"] == rid]

    wait_for(
        lambda: len(found := rows()) == 2 and all(r["kind"] != "in_flight" for r in found),
        5,
        "attempt records of the credential fallback",
    )
    assert [(r["status"], r["is_byok_fallback"], r["is_retry"]) for r in rows()] == [
        (401, False, False),
        (200, True, False),
    ]


def test_credential_fallback_also_follows_a_403(gw: Gateway, keys: dict[str, str]) -> None:
    response = chat(gw.base_url, keys["own_then_shared"], "bk-fb4")
    assert response.status_code == 200 and response.headers["x-turnout-byok-fallback"] == "1"


def test_without_credential_fallback_a_rejected_own_key_is_terminal(gw: Gateway) -> None:
    admin = Admin(gw.base_url, ACME_ADMIN)
    secret = admin.call(
        "POST",
        "/orgs/acme/keys",
        {"name": "no-cf", "settings": {"policy": {"fallback": {"credential_fallback": False}}}},
    ).json()["secret"]
    response = chat(gw.base_url, secret, "bk-fb2")
    assert response.status_code == 401
    entries = sim_entries(gw, response.headers["x-request-id"])
    assert [e["auth_fingerprint"] for e in entries] == [fp(CANARY)]


def test_own_only_never_falls_back_to_the_shared_key(gw: Gateway, keys: dict[str, str]) -> None:
    response = chat(gw.base_url, keys["own_only"], "bk-fb3")
    assert response.status_code == 401
    assert [e["auth_fingerprint"] for e in sim_entries(gw, response.headers["x-request-id"])] == [fp(CANARY)]


def test_streaming_direct_path_uses_the_tenant_key_too(gw: Gateway, keys: dict[str, str]) -> None:
    with redis.Redis.from_url(gw.redis_url) as r:  # the scripted 401s of earlier tests opened acme's sim-a credential
        stale = r.keys("turnout:breaker:credential:*")
        if stale:
            r.delete(*stale)
    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        timeout=30,
        headers={"authorization": f"Bearer {keys['own_then_shared']}"},
        json={"model": "bk-a", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    ) as r:
        assert r.status_code == 200
        r.read()
        rid = r.headers["x-request-id"]
    assert [e["auth_fingerprint"] for e in sim_entries(gw, rid)] == [fp(CANARY)]


def test_platform_keys_never_reach_a_custom_endpoint(gw: Gateway) -> None:
    admin = Admin(gw.base_url, ACME_ADMIN)
    assert admin.call("PUT", "/orgs/acme/custom-endpoints/keyless", {"base_url": f"{gw.sim_url}/v1"}).status_code == 200
    secret = admin.call(
        "POST",
        "/orgs/acme/keys",
        {"name": "keyless-user", "settings": {"key_mode": "own_then_shared", "reroutes": ["custom:keyless:kl-model"]}},
    ).json()["secret"]
    response = chat(gw.base_url, secret, "bk-a")
    entries = sim_entries(gw, response.headers["x-request-id"])
    assert [e["model"] for e in entries] == ["kl-model"]
    assert entries[0]["auth_fingerprint"] is None  # no key registered: no Authorization header at all
    assert response.status_code == 401  # the simulator wants a key; ours, never a platform one


def test_a_new_provider_key_reaches_the_worker_within_the_bound(gw: Gateway, keys: dict[str, str]) -> None:
    admin = Admin(gw.base_url, ACME_ADMIN)
    own_b = "own-b-key-propagation-0001"
    assert admin.call("PUT", "/orgs/acme/provider-keys/sim-b", {"api_key": own_b}).status_code == 200
    try:

        def carried_own_b() -> bool:
            response = chat(gw.base_url, keys["own_then_shared"], "bk-b")
            return [e["auth_fingerprint"] for e in sim_entries(gw, response.headers["x-request-id"])] == [fp(own_b)]

        assert wait_for(carried_own_b, 2.0, "the worker using the new provider key") < 2.0
    finally:
        assert admin.call("DELETE", "/orgs/acme/provider-keys/sim-b").status_code == 200
