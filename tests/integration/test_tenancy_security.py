"""Tenancy security against a real fleet: cross-org probes, hostile endpoint URLs, the canary provider key.

- Every admin route, called by one org's admin key on another org's objects,
  answers exactly as for a missing object (404, one body) and changes nothing.
- The attempt-record export of an org holds only that org's rows; the operator
  exports the org it names, an org admin never another org's (404, as missing).
- Every hostile base URL of `tests/data/hostile_urls.txt` is refused by the API.
- The canary provider key (org `acme`'s BYOK key for `sim-a`, from the
  environment) never appears in process logs, response bodies, admin reads,
  exports or Redis.
- A sealed key copied into another org's document (as by a Redis write) does
  not open there: the attempt has no credential and the key is never sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
import redis
import redis.asyncio as aioredis

from support.gateway import Gateway
from support.procs import Fleet
from support.tenancy import (
    ACME_ADMIN,
    ACME_USER,
    BETA_ADMIN,
    BETA_ENDPOINT_KEY,
    BETA_USER,
    CANARY,
    OPERATOR,
    SHARED_A,
    Admin,
    chat,
    fp,
    sim_entries,
    start_tenancy,
    wait_for,
)
from turnout.state.tenant_store import TenantStore
from turnout.stored.orgs import OrgDoc

pytestmark = pytest.mark.integration

HOSTILE = [
    line.strip()
    for line in (Path(__file__).resolve().parents[1] / "data" / "hostile_urls.txt").read_text().splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def not_found(method: str, path: str) -> dict[str, object]:
    """The one 404 body: it names the route asked for, the same for another org's object and a missing one."""
    return {
        "error": {
            "message": f"No such object: {method} {path}.",
            "type": "not_found_error",
            "param": None,
            "code": "not_found",
        }
    }


# (method, path template, body); {org} is the other org, {squad}/{key}/{provider}/{endpoint} its objects
ORG_ROUTES: list[tuple[str, str, object]] = [
    ("GET", "/orgs/{org}", None),
    ("GET", "/orgs/{org}/settings", None),
    ("PUT", "/orgs/{org}/settings", {"reroutes": ["t-ok"]}),
    ("PATCH", "/orgs/{org}/settings", {"key_mode": "shared_only"}),
    ("GET", "/orgs/{org}/squads", None),
    ("POST", "/orgs/{org}/squads", {"name": "intruder"}),
    ("GET", "/orgs/{org}/squads/{squad}", None),
    ("DELETE", "/orgs/{org}/squads/{squad}", None),
    ("GET", "/orgs/{org}/squads/{squad}/settings", None),
    ("PUT", "/orgs/{org}/squads/{squad}/settings", {}),
    ("PATCH", "/orgs/{org}/squads/{squad}/settings", {"reroutes": None}),
    ("GET", "/orgs/{org}/keys", None),
    ("POST", "/orgs/{org}/keys", {"name": "intruder", "admin": True}),
    ("GET", "/orgs/{org}/keys/{key}", None),
    ("PATCH", "/orgs/{org}/keys/{key}", {"admin": True}),
    ("DELETE", "/orgs/{org}/keys/{key}", None),
    ("POST", "/orgs/{org}/keys/{key}/revoke", None),
    ("GET", "/orgs/{org}/keys/{key}/effective", None),
    ("GET", "/orgs/{org}/keys/{key}/settings", None),
    ("PUT", "/orgs/{org}/keys/{key}/settings", {"key_mode": "own_only"}),
    ("PATCH", "/orgs/{org}/keys/{key}/settings", {"reroutes": ["t-ok"]}),
    ("GET", "/orgs/{org}/provider-keys", None),
    ("PUT", "/orgs/{org}/provider-keys/{provider}", {"api_key": "intruder-key-000000000"}),
    ("DELETE", "/orgs/{org}/provider-keys/{provider}", None),
    ("GET", "/orgs/{org}/custom-endpoints", None),
    ("GET", "/orgs/{org}/custom-endpoints/{endpoint}", None),
    ("PUT", "/orgs/{org}/custom-endpoints/{endpoint}", {"base_url": "https://intruder.example/v1"}),
    ("DELETE", "/orgs/{org}/custom-endpoints/{endpoint}", None),
]
OPERATOR_ROUTES: list[tuple[str, str, object]] = [
    ("POST", "/orgs", {"id": "intruder-org"}),
    ("DELETE", "/orgs/{org}", None),
    ("POST", "/secrets/rotate", None),
]
VICTIMS = {
    # caller key -> (its org, the other org, names existing in the other org, names only in the caller's org)
    ACME_ADMIN: (
        "acme",
        "beta",
        {"squad": "ops", "key": "user", "provider": "sim-a", "endpoint": "beta-ep"},
        {"squad": "research", "key": "admin", "provider": "sim-a", "endpoint": "nothing"},
    ),
    BETA_ADMIN: (
        "beta",
        "acme",
        {"squad": "research", "key": "user", "provider": "sim-a", "endpoint": "acme-ep"},
        {"squad": "ops", "key": "admin", "provider": "sim-b", "endpoint": "beta-ep"},
    ),
}


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    fleet = Fleet()
    try:
        gateway = start_tenancy(fleet)
        acme = Admin(gateway.base_url, ACME_ADMIN)
        assert acme.call("PUT", "/orgs/acme/custom-endpoints/acme-ep", {"base_url": f"{gateway.sim_url}/v1"}).is_success
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


def _snapshot(gw: Gateway, org: str) -> str:
    operator = Admin(gw.base_url, OPERATOR)
    parts = [
        operator.call("GET", f"/orgs/{org}").text,
        operator.call("GET", f"/orgs/{org}/keys").text,
        operator.call("GET", f"/orgs/{org}/squads").text,
    ]
    return "\n".join(parts)


def test_cross_org_probes_leak_nothing(gw: Gateway) -> None:
    before = {org: _snapshot(gw, org) for org in ("acme", "beta")}
    probes = 0
    for caller, (own, other, theirs, mine) in VICTIMS.items():
        names_sets = [theirs, mine, {k: "no-such-object" for k in theirs}]
        for (method, template, body), names, header in itertools.product(
            ORG_ROUTES,
            names_sets,
            ("authorization", "x-api-key"),
        ):
            path = template.format(org=other, **names)
            value = f"Bearer {caller}" if header == "authorization" else caller
            response = httpx.request(method, f"{gw.base_url}/admin/v1{path}", json=body, headers={header: value})
            probes += 1
            assert response.status_code == 404, (method, path, response.text)
            assert response.json() == not_found(method, f"/admin/v1{path}"), (method, path)
        for org in (other, "no-such-org"):
            response = httpx.get(f"{gw.base_url}/admin/v1/orgs/{org}", headers={"authorization": f"Bearer {caller}"})
            probes += 1
            assert response.json() == not_found("GET", f"/admin/v1/orgs/{org}")
        for method, template, body in OPERATOR_ROUTES:
            response = httpx.request(
                method,
                f"{gw.base_url}/admin/v1{template.format(org=other)}",
                json=body,
                headers={"authorization": f"Bearer {caller}"},
            )
            probes += 1
            assert response.status_code == 403 and other not in response.text
        listed = httpx.get(f"{gw.base_url}/admin/v1/orgs", headers={"authorization": f"Bearer {caller}"})
        probes += 1
        assert [o["id"] for o in listed.json()["orgs"]] == [own]
    assert probes >= 200
    assert {org: _snapshot(gw, org) for org in ("acme", "beta")} == before


def test_non_admin_and_missing_keys_cannot_use_admin_routes(gw: Gateway) -> None:
    for method, template, body in ORG_ROUTES:
        path = template.format(org="acme", squad="research", key="user", provider="sim-a", endpoint="acme-ep")
        user = httpx.request(
            method, f"{gw.base_url}/admin/v1{path}", json=body, headers={"authorization": f"Bearer {ACME_USER}"}
        )
        assert user.status_code == 403 and user.json()["error"]["code"] == "admin_key_required"
        anonymous = httpx.request(method, f"{gw.base_url}/admin/v1{path}", json=body)
        assert anonymous.status_code == 401


def test_log_export_holds_only_the_callers_org(gw: Gateway) -> None:
    rids: dict[str, set[str]] = {"acme": set(), "beta": set()}
    for _ in range(3):
        rids["acme"].add(chat(gw.base_url, ACME_USER, "t-ok").headers["x-request-id"])
        rids["beta"].add(chat(gw.base_url, BETA_USER, "t-ok").headers["x-request-id"])
    for caller, own, other in ((ACME_ADMIN, "acme", "beta"), (BETA_ADMIN, "beta", "acme")):
        admin = Admin(gw.base_url, caller)

        def rows(fmt: str = "jsonl") -> list[dict[str, object]]:
            return [
                json.loads(line) for line in admin.call("GET", "/logs/export", params={"format": fmt}).text.splitlines()
            ]

        wait_for(lambda: rids[own] <= {r["request_id"] for r in rows()}, 5, f"{own}'s records")
        exported = rows()
        assert {r["org"] for r in exported} == {own}
        assert not rids[other] & {r["request_id"] for r in exported}
        csv_text = admin.call("GET", "/logs/export", params={"format": "csv"}).text
        assert all(rid not in csv_text for rid in rids[other])


def test_the_operator_exports_the_org_it_names_and_an_org_admin_only_its_own(gw: Gateway, tmp_path: Path) -> None:
    rid = chat(gw.base_url, BETA_USER, "t-ok").headers["x-request-id"]
    operator, acme = Admin(gw.base_url, OPERATOR), Admin(gw.base_url, ACME_ADMIN)

    def rows(admin: Admin, **params: str) -> list[dict[str, object]]:
        answer = admin.call("GET", "/logs/export", params=params)
        assert answer.status_code == 200, answer.text
        return [json.loads(line) for line in answer.text.splitlines()]

    wait_for(lambda: rid in {r["request_id"] for r in rows(operator, org="beta")}, 5, "beta's records")
    assert {r["org"] for r in rows(operator, org="beta")} == {"beta"}
    assert {r["org"] for r in rows(acme, org="acme")} <= {"acme"}  # its own org, named
    unnamed = operator.call("GET", "/logs/export")
    assert unnamed.status_code == 400, unnamed.text
    error = unnamed.json()["error"]
    assert (error["param"], error["code"], error["type"]) == ("org", "invalid_value", "invalid_request_error")
    assert "`org` is required with the operator key" in error["message"]
    for params, param in (
        ({"since": "2030-01-01", "until": "2020-01-01"}, "since"),
        ({"until": "garbage"}, "until"),
        ({"format": "xml"}, "format"),
    ):
        bad = operator.call("GET", "/logs/export", params={"org": "beta", **params})
        assert bad.status_code == 400, (params, bad.text)
        assert (bad.json()["error"]["param"], bad.json()["error"]["code"]) == (param, "invalid_value")
    for admin, org in ((acme, "beta"), (acme, "no-such-org"), (operator, "no-such-org")):
        # another org's and a missing one answer alike, naming the org asked for (the caller's own words)
        message = f"No such org `{org}`: GET /admin/v1/logs/export."
        expected = {"error": {"message": message, "type": "not_found_error", "param": "org", "code": "not_found"}}
        answer = admin.call("GET", "/logs/export", params={"org": org})
        assert (answer.status_code, answer.json()) == (404, expected), (org, answer.text)
    long = operator.call("GET", "/logs/export", params={"org": "x" * 300})
    assert long.status_code == 404 and f"No such org `{'x' * 64}`… (300 characters)" in long.json()["error"]["message"]
    out = tmp_path / "beta.jsonl"
    cli = [sys.executable, "-m", "turnout_cli.main", "logs", "export", "--url", gw.base_url, "--key", OPERATOR]
    done = subprocess.run([*cli, "--org", "beta", "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert rid in {json.loads(line)["request_id"] for line in out.read_text().splitlines()}
    refused = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "400: `org` is required with the operator key" in refused.stderr


def test_every_hostile_base_url_is_refused_by_the_admin_api(gw: Gateway) -> None:
    acme = Admin(gw.base_url, ACME_ADMIN)
    assert len(HOSTILE) >= 60
    for i, url in enumerate(HOSTILE):
        response = acme.call("PUT", f"/orgs/acme/custom-endpoints/hostile-{i}", {"base_url": url})
        assert response.status_code == 400, (url, response.text)
        assert response.json()["error"]["param"] == "base_url", url
    endpoints = acme.call("GET", "/orgs/acme/custom-endpoints").json()["custom_endpoints"]
    assert not any(e["id"].startswith("hostile-") for e in endpoints)


def test_the_canary_provider_key_never_leaks(gw: Gateway) -> None:
    acme, operator = Admin(gw.base_url, ACME_ADMIN), Admin(gw.base_url, OPERATOR)
    bodies: list[str] = []
    served = chat(gw.base_url, ACME_USER, "bk-a")  # own key (the canary) serves
    assert served.status_code == 200
    assert [e["auth_fingerprint"] for e in sim_entries(gw, served.headers["x-request-id"])] == [fp(CANARY)]
    bodies.append(served.text)
    no_cf = acme.call(
        "POST",
        "/orgs/acme/keys",
        {"name": "canary-no-cf", "settings": {"policy": {"fallback": {"credential_fallback": False}}}},
    ).json()["secret"]
    rejected = chat(gw.base_url, no_cf, "bk-fb2")  # the canary rejected: the error body quotes the provider
    assert rejected.status_code == 401
    bodies += [rejected.text, chat(gw.base_url, ACME_USER, "t-fail").text, chat(gw.base_url, ACME_USER, "bk-fb1").text]
    for path in (
        "/orgs/acme",
        "/orgs/acme/provider-keys",
        "/orgs/acme/keys",
        "/orgs/acme/settings",
        "/orgs/acme/custom-endpoints",
        "/orgs/acme/keys/user/effective",
        "/orgs",
    ):
        bodies.append(acme.call("GET", path).text)
        bodies.append(operator.call("GET", path).text)
    assert "…" + CANARY[-4:] in acme.call("GET", "/orgs/acme/provider-keys").text
    wait_for(lambda: "bk-fb1" in acme.call("GET", "/logs/export").text, 5, "records exported")
    bodies += [acme.call("GET", "/logs/export", params={"format": f}).text for f in ("jsonl", "csv")]
    for text in bodies:
        assert CANARY not in text
        assert BETA_ENDPOINT_KEY not in text
    for proc in gw.fleet.procs:
        assert CANARY not in proc.log(), f"canary in the log of {proc.name}"
    assert CANARY.encode() not in _redis_contents(gw.redis_url)
    assert CANARY not in (gw.fleet.workdir / "turnout.yaml").read_text()


def _redis_contents(url: str) -> bytes:
    """Every key and value in Redis, concatenated (strings, hashes, sets, lists, sorted sets, streams)."""
    out: list[bytes] = []
    with redis.Redis.from_url(url) as client:
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            out.append(key)
            if kind == b"string":
                out.append(client.get(key) or b"")
            elif kind == b"hash":
                out.extend(b"%s=%s" % kv for kv in client.hgetall(key).items())
            elif kind == b"set":
                out.extend(client.smembers(key))
            elif kind == b"list":
                out.extend(client.lrange(key, 0, -1))
            elif kind == b"zset":
                out.extend(client.zrange(key, 0, -1))
            elif kind == b"stream":
                out.extend(b"%s=%s" % kv for _, fields in client.xrange(key) for kv in fields.items())
    assert out, "redis is empty: nothing was checked"
    return b"\n".join(out)


def _copy_acme_byok_into_beta(redis_url: str) -> None:
    """Org acme's sealed `sim-a` key written into org beta's document, as a Redis write would."""

    async def run() -> None:
        client = aioredis.Redis.from_url(redis_url)
        store = TenantStore(client)
        acme, _ = await store.load("acme")
        assert acme is not None
        moved = acme.provider_keys["sim-a"]

        def mutate(doc: OrgDoc | None) -> tuple[OrgDoc | None, None]:
            assert doc is not None
            return msgspec.structs.replace(doc, provider_keys={**doc.provider_keys, "sim-a": moved}), None

        await store.update("beta", mutate)
        await client.aclose()

    asyncio.run(run())


def test_a_sealed_key_moved_to_another_org_is_never_sent(gw: Gateway) -> None:
    beta = Admin(gw.base_url, BETA_ADMIN)
    own_only = beta.call("POST", "/orgs/beta/keys", {"name": "moved-own", "settings": {"key_mode": "own_only"}})
    shared_ok = beta.call("POST", "/orgs/beta/keys", {"name": "moved-default"})
    assert own_only.status_code == shared_ok.status_code == 201
    _copy_acme_byok_into_beta(gw.redis_url)
    wait_for(lambda: "sim-a" in beta.call("GET", "/orgs/beta/provider-keys").text, 5, "the moved key listed")
    skipped = chat(gw.base_url, own_only.json()["secret"], "bk-a")
    assert skipped.status_code == 502 and "usable credential" in skipped.text, skipped.text
    assert sim_entries(gw, skipped.headers["x-request-id"]) == []  # no call at all: the key did not open
    shared = chat(gw.base_url, shared_ok.json()["secret"], "bk-a")
    assert shared.status_code == 200
    assert [e["auth_fingerprint"] for e in sim_entries(gw, shared.headers["x-request-id"])] == [fp(SHARED_A)]
    logs = "".join(p.log() for p in gw.fleet.procs)
    assert "org beta: provider key sim-a cannot be used" in logs and "does not open for its place" in logs
    own = chat(gw.base_url, ACME_USER, "bk-a")  # where it belongs it still opens
    assert [e["auth_fingerprint"] for e in sim_entries(gw, own.headers["x-request-id"])] == [fp(CANARY)]
