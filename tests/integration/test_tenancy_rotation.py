"""Rotation of TURNOUT_SECRET_KEY (README "Tenancy and keys"): new key first, rotate, drop the old one.

The fleet runs on key K1; restarted on "K2,K1"; `turnout admin rotate-secrets`
re-seals every stored secret under K2, bound to its place; restarted on K2 alone, the tenant's
keys still reach the simulator, and Redis holds only K2 tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import redis
from cryptography.fernet import Fernet

from support.gateway import Gateway
from support.procs import Fleet
from support.tenancy import (
    ACME_ADMIN,
    ACME_USER,
    CANARY,
    OPERATOR,
    Admin,
    chat,
    fp,
    sim_entries,
    start_tenancy,
    tenancy_env,
)
from turnout.vault import Binding, Sealed, SecretUnreadable, Vault, endpoint_binding, provider_key_binding

pytestmark = pytest.mark.integration

ENDPOINT_KEY = "acme-rotating-endpoint-key-01"


def _restart(gw: Gateway, env: dict[str, str], name: str) -> str:
    """Stop the ingress and workers, start them again with `env`; returns the new base URL."""
    config_path = gw.fleet.workdir / "turnout.yaml"
    for proc in [p for p in gw.fleet.procs if p.name.startswith(("ingress-", "worker"))]:
        proc.stop()
        gw.fleet.procs.remove(proc)
    gw.fleet.worker(config_path, gw.redis_url, name=f"worker-{name}", env=env)
    _, base = gw.fleet.ingress(config_path, gw.redis_url, env=env)
    return base


def _tokens(redis_url: str) -> list[tuple[Sealed, Binding]]:
    with redis.Redis.from_url(redis_url) as client:
        doc = json.loads(client.get("turnout:tenancy:org:acme") or b"{}")
    tokens = [(Sealed(**k["secret"]), provider_key_binding("acme", n)) for n, k in doc["provider_keys"].items()]
    tokens += [
        (Sealed(**e["secret"]), endpoint_binding("acme", n))
        for n, e in doc["custom_endpoints"].items()
        if e.get("secret")
    ]
    return tokens


def _served_with_tenant_keys(base: str, gw: Gateway, endpoint_user: str) -> None:
    own = chat(base, ACME_USER, "bk-a")
    assert own.status_code == 200, own.text
    assert [e["auth_fingerprint"] for e in sim_entries(gw, own.headers["x-request-id"])] == [fp(CANARY)]
    custom = chat(base, endpoint_user, "t-ok")
    assert custom.status_code == 200, custom.text
    assert [e["auth_fingerprint"] for e in sim_entries(gw, custom.headers["x-request-id"])] == [fp(ENDPOINT_KEY)]


def test_rotate_secrets_moves_every_secret_to_the_new_key() -> None:
    k1, k2 = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    fleet = Fleet()
    try:
        gw = start_tenancy(fleet, tenancy_env(k1))
        admin = Admin(gw.base_url, ACME_ADMIN)
        assert (
            admin.call(
                "PUT", "/orgs/acme/custom-endpoints/rot-ep", {"base_url": f"{gw.sim_url}/v1", "api_key": ENDPOINT_KEY}
            ).status_code
            == 200
        )
        endpoint_user = admin.call(
            "POST", "/orgs/acme/keys", {"name": "rot-user", "settings": {"reroutes": ["custom:rot-ep:rot-model"]}}
        ).json()["secret"]
        _served_with_tenant_keys(gw.base_url, gw, endpoint_user)
        tokens = _tokens(gw.redis_url)
        assert len(tokens) == 2 and all(Vault([k1]).open(t, where) for t, where in tokens)

        base = _restart(gw, tenancy_env(f"{k2},{k1}"), "both-keys")
        _served_with_tenant_keys(base, gw, endpoint_user)
        rotated = subprocess.run(
            [sys.executable, "-m", "turnout_cli.main", "admin", "--url", base, "--key", OPERATOR, "rotate-secrets"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert rotated.returncode == 0, rotated.stderr
        assert json.loads(rotated.stdout)["rotated"]["acme"] == 2
        tokens = _tokens(gw.redis_url)
        for token, where in tokens:
            Vault([k2]).open(token, where)
            with pytest.raises(SecretUnreadable):
                Vault([k1]).open(token, where)

        base = _restart(gw, tenancy_env(k2), "new-key")
        _served_with_tenant_keys(base, gw, endpoint_user)
        listed = Admin(base, ACME_ADMIN).call("GET", "/orgs/acme/provider-keys").json()
        assert listed["provider_keys"][0]["api_key"] == "…" + CANARY[-4:]
        for proc in fleet.procs:
            assert CANARY not in proc.log() and ENDPOINT_KEY not in proc.log()
            assert k1 not in proc.log() and k2 not in proc.log()
    finally:
        fleet.stop_all()


def test_gen_secret_key_prints_a_usable_fernet_key() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "turnout_cli.main", "admin", "gen-secret-key"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    assert Fernet(out.encode()).decrypt(Fernet(out.encode()).encrypt(b"x")) == b"x"
