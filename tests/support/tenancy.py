"""A fleet for the tenancy tests: two orgs from the file, operator and secret keys, BYOK from the environment.

Owns: the tenancy fleet's configuration and environment, the key and
fingerprint helpers tests use (`fp` is the simulator's `auth_fingerprint` of
a bearer key), and a small admin client.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.fernet import Fernet

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

OPERATOR = "op-turnout-test-operator-000001"
ACME_ADMIN = "tk-acme-admin-00000000001"
ACME_USER = "tk-acme-user-000000000001"
BETA_ADMIN = "tk-beta-admin-00000000001"
BETA_USER = "tk-beta-user-000000000001"
SHARED_A = "shared-key-a-0000000000001"
SHARED_B = "shared-key-b-0000000000001"
CANARY = "sk-canary-9c1e7f3a5b2d4e6f8a0b1c2d3e4f5a6b"
BETA_ENDPOINT_KEY = "beta-endpoint-key-000000001"

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: {shared_a}}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: {shared_b}}}
  sim-noshared: {{kind: openai_compatible, base_url: "{sim}/v1"}}
models:
  t-ok:            {{offers: [{{provider: sim-a, model: t-ok}}]}}
  t-priced:
    offers: [{{provider: sim-a, model: t-priced, input_usd_per_mtok: 1000, output_usd_per_mtok: 1000}}]
  t-alt:           {{offers: [{{provider: sim-b, model: t-alt}}]}}
  t-other:         {{offers: [{{provider: sim-b, model: t-other}}]}}
  bk-a:            {{offers: [{{provider: sim-a, model: bk-a}}]}}
  bk-b:            {{offers: [{{provider: sim-b, model: bk-b}}]}}
  bk-ab:
    order: priority
    offers: [{{provider: sim-b, model: bkab-b}}, {{provider: sim-a, model: bkab-a}}]
  bk-noshared:     {{offers: [{{provider: sim-noshared, model: bk-ns}}]}}
  bk-fb1:          {{offers: [{{provider: sim-a, model: "bkfb1~401,200"}}]}}
  bk-fb2:          {{offers: [{{provider: sim-a, model: "bkfb2~401,200"}}]}}
  bk-fb3:          {{offers: [{{provider: sim-a, model: "bkfb3~401,200"}}]}}
  bk-fb4:          {{offers: [{{provider: sim-a, model: "bkfb4~403,200"}}]}}
  t-fail:          {{offers: [{{provider: sim-a, model: "tfail~500"}}]}}
gateway:
  records_max: 10000
egress: {{schemes: [http], ports: any}}   # the simulator listens on plain http, any free port
orgs:
  acme:
    provider_keys: {{sim-a: ${{ACME_BYOK}}}}
    squads:
      research: {{settings: {{fallbacks: [t-alt]}}}}
    keys:
      - {{name: admin, key: {acme_admin}, admin: true}}
      - {{name: user, squad: research, key: {acme_user}}}
  beta:
    custom_endpoints: {{beta-ep: {{base_url: "{sim}/v1", api_key: {beta_ep}}}}}
    squads:
      ops: {{settings: {{reroutes: [t-other]}}}}
    keys:
      - {{name: admin, key: {beta_admin}, admin: true}}
      - {{name: user, squad: ops, key: {beta_user}}}
"""


def fp(key: str) -> str:
    """The simulator's fingerprint of a request that carried `Authorization: Bearer <key>`."""
    return hashlib.sha256(f"Bearer {key}".encode()).hexdigest()[:8]


def tenancy_env(secret_key: str | None = None) -> dict[str, str]:
    """The environment of the tenancy fleet's ingress and workers."""
    return {
        "TURNOUT_OPERATOR_KEY": OPERATOR,
        "TURNOUT_SECRET_KEY": secret_key or Fernet.generate_key().decode(),
        "TURNOUT_SSRF_ALLOW": "127.0.0.1",
        "ACME_BYOK": CANARY,
        "TURNOUT_METRICS_PORT": "0",
    }


def start_tenancy(fleet: Fleet, env: dict[str, str] | None = None, workers: int = 1) -> Gateway:
    """Redis, simulator, worker(s) and ingress with the tenancy configuration."""
    require_redis()
    return start_gateway(
        fleet,
        CONFIG,
        workers=workers,
        env=env or tenancy_env(),
        shared_a=SHARED_A,
        shared_b=SHARED_B,
        acme_admin=ACME_ADMIN,
        acme_user=ACME_USER,
        beta_admin=BETA_ADMIN,
        beta_user=BETA_USER,
        beta_ep=BETA_ENDPOINT_KEY,
    )


@contextmanager
def tenancy_fleet(env: dict[str, str] | None = None) -> Iterator[Gateway]:
    """A started tenancy fleet (`start_tenancy`), stopped on leaving."""
    fleet = Fleet()
    try:
        gateway = start_tenancy(fleet, env or tenancy_env())
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@dataclass
class Admin:
    """A tiny admin API client for one bearer key."""

    base_url: str
    key: str
    seen: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        """Call `/admin/v1{path}`; every response body is kept in `seen` (for leak checks)."""
        response = httpx.request(
            method,
            f"{self.base_url}/admin/v1{path}",
            json=json,
            headers={"authorization": f"Bearer {self.key}"},
            timeout=10,
            **kwargs,
        )
        self.seen.append(response.text)
        return response


def chat(base_url: str, key: str, model: str, **extra: Any) -> httpx.Response:
    """One non-streaming chat completion through the ingress with `key`."""
    return httpx.post(
        f"{base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], **extra},
        timeout=30,
    )


def sim_entries(gw: Gateway, request_id: str) -> list[dict[str, Any]]:
    """The simulator's log entries of one Turnout request (by `x-request-id`)."""
    entries: list[dict[str, Any]] = httpx.get(f"{gw.sim_url}/sim/log").json()
    return [e for e in entries if e.get("request_id") == request_id]


def wait_for(check: Any, timeout_s: float, what: str) -> float:
    """Poll `check()` every 20 ms until truthy; returns the seconds it took (AssertionError on timeout)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout_s} s")
