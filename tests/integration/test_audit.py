"""The audit log of admin writes (who, what, when; no secrets), exported by the operator.

Its own tenancy fleet: writes by an org admin, the operator, a caller of
another org and an unknown key, then the operator's export (route and
`turnout audit export`), grepped for the secrets those writes carried.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.gateway import Gateway
from support.tenancy import ACME_ADMIN, BETA_ADMIN, OPERATOR, Admin, tenancy_fleet

pytestmark = pytest.mark.integration

PROVIDER_SECRET = "sk-audit-canary-5f1d2e3c4b5a69788796a5b4"


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with tenancy_fleet() as gateway:
        yield gateway


def _export(gw: Gateway, key: str = OPERATOR, **params: Any) -> list[dict[str, Any]]:
    response = Admin(gw.base_url, key).call("GET", "/audit/export", params=params)
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def test_audit_records_every_admin_write_without_secrets_and_only_the_operator_exports(gw: Gateway) -> None:
    started = time.time()
    acme, beta, operator = Admin(gw.base_url, ACME_ADMIN), Admin(gw.base_url, BETA_ADMIN), Admin(gw.base_url, OPERATOR)
    made = acme.call("POST", "/orgs/acme/keys", {"name": "audited", "settings": {"limits": {"rpm": 5}}})
    assert made.status_code == 201
    secret = made.json()["secret"]
    assert acme.call("PATCH", "/orgs/acme/keys/audited/settings", {"limits": {"rpm": 7}}).status_code == 200
    assert acme.call("PUT", "/orgs/acme/provider-keys/sim-b", {"api_key": PROVIDER_SECRET}).status_code == 200
    assert beta.call("DELETE", "/orgs/acme/keys/audited").status_code == 404
    assert Admin(gw.base_url, "tk-nobody-0000000000000").call("POST", "/orgs", {"id": "x"}).status_code == 401
    assert operator.call("POST", "/orgs", {"id": "audit-org"}).status_code == 201
    assert acme.call("PATCH", "/orgs/acme/keys/no%20such/settings", {"limits": None}).status_code == 404
    assert acme.call("GET", "/orgs/acme").status_code == 200  # a read: not recorded

    entries = _export(gw, since=f"{started:.3f}")
    seen = [(e["who"], e["method"], e["path"], e["status"], e["fields"]) for e in entries]
    assert seen == [
        ("key acme/admin", "POST", "/admin/v1/orgs/acme/keys", 201, ["name", "settings"]),
        ("key acme/admin", "PATCH", "/admin/v1/orgs/acme/keys/audited/settings", 200, ["limits"]),
        ("key acme/admin", "PUT", "/admin/v1/orgs/acme/provider-keys/sim-b", 200, ["api_key"]),
        ("key beta/admin", "DELETE", "/admin/v1/orgs/acme/keys/audited", 404, []),
        ("operator", "POST", "/admin/v1/orgs", 201, ["id"]),
        ("key acme/admin", "PATCH", "/admin/v1/orgs/acme/keys/no%20such/settings", 404, ["limits"]),  # as sent
    ]
    # the caller's org, never the path's of a refused request (beta's refused DELETE on acme's key is beta's)
    assert [e["org"] for e in entries] == ["acme", "acme", "acme", "beta", "audit-org", "acme"]
    samples = _export(gw, since=f"{started:.3f}", samples="true")  # the unauthenticated write: sampled apart
    assert [(s["who"], s["org"], s["path"], s["status"]) for s in samples][:1] == [
        ("unauthenticated", None, "/admin/v1/orgs", 401)
    ]
    assert all(e["at"].endswith("Z") and e["at"] >= time.strftime("%Y-%m-%dT", time.gmtime(started)) for e in entries)
    dump = json.dumps(entries)
    assert PROVIDER_SECRET not in dump and secret not in dump and PROVIDER_SECRET[-8:] not in dump

    assert _export(gw, since=str(time.time() + 3600)) == []
    reversed_range = Admin(gw.base_url, OPERATOR).call(
        "GET", "/audit/export", params={"since": "2030-01-01", "until": "2020-01-01"}
    )
    assert reversed_range.status_code == 400, reversed_range.text
    error = reversed_range.json()["error"]
    assert (error["param"], error["code"], error["type"]) == ("since", "invalid_value", "invalid_request_error")
    refused = acme.call("GET", "/audit/export")
    assert refused.status_code == 403

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnout_cli.main",
            "audit",
            "export",
            "--url",
            gw.base_url,
            "--since",
            str(started - 1),
        ],
        capture_output=True,
        timeout=60,
        env={"TURNOUT_OPERATOR_KEY": OPERATOR, "PATH": "/usr/bin:/bin"},
    )
    assert cli.returncode == 0, cli.stderr
    assert [json.loads(line) for line in cli.stdout.decode().splitlines()][: len(entries)] == entries


def test_10000_unauthenticated_admin_writes_lose_no_real_entry_and_are_counted(gw: Gateway) -> None:
    started = time.time()
    operator = Admin(gw.base_url, OPERATOR)
    made = [operator.call("POST", "/orgs", {"id": f"flood-{i}"}).status_code for i in range(20)]
    assert made == [201] * 20
    before = _export(gw, since=f"{started:.3f}")
    flood = 10_000

    async def attack() -> list[int]:
        limits = httpx.Limits(max_connections=32)
        headers = {"authorization": "Bearer tk-attacker-000000000000"}
        async with httpx.AsyncClient(base_url=gw.base_url, limits=limits, headers=headers, timeout=30) as client:
            gate = asyncio.Semaphore(32)

            async def one(i: int) -> int:
                async with gate:
                    path = f"/admin/v1/orgs/flood-{i % 20}/keys"  # the attacker's path names a real org
                    return (await client.post(path, json={"name": "x"})).status_code

            return list(await asyncio.gather(*(one(i) for i in range(flood))))

    took_s = time.monotonic()
    statuses = asyncio.run(attack())
    took_s = time.monotonic() - took_s
    assert statuses == [401] * flood
    after = _export(gw, since=f"{started:.3f}")
    assert after == before  # 0 real entries lost, none added by the flood
    assert all(e["who"] == "operator" and e["org"] and e["org"].startswith("flood-") for e in after), after
    samples = _export(gw, since=f"{started:.3f}", samples="true")
    assert 0 < len(samples) <= took_s + 2 and all(s["org"] is None for s in samples)  # one per second at most
    metrics = httpx.get(f"{gw.base_url}/metrics").text
    counted = [line for line in metrics.splitlines() if line.startswith("turnout_audit_unauthenticated_writes_total")]
    assert counted and float(counted[0].split()[-1]) >= flood
    print(f"\n10,000 unauthenticated writes in {took_s:.1f} s: {len(samples)} samples, {len(after)} entries kept")
