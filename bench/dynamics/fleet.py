"""One fleet per scenario: redis-server, simulator, workers and ingress on 127.0.0.1.

Owns: the YAML written for a scenario (providers, the scenario's models, its
`breaker:` section, the bench org and the two tenant orgs of S5), starting
the processes through `tests/support/procs.Fleet` and stopping every one of
them on the way out, whatever the way out is.
Needs: `tests/` on `sys.path` (for `support.procs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from cryptography.fernet import Fernet

from support.procs import Fleet
from turnout.config import load_config

KEY = "tk-bench-dynamics-000000001"
KEY_TENANT_A = "tk-bench-tenant-a-00000001"
KEY_TENANT_B = "tk-bench-tenant-b-00000001"
PLATFORM_KEY_A = "platform-key-a-0000000001"
PLATFORM_KEY_B = "platform-key-b-0000000001"
REVOKED_KEY = "sk-sim-revoked-tenant-a-0001"  # the simulator answers 401 to this prefix
DRAIN_KEY = "bench-drain-key-0000000001"  # the harness's own calls straight to the simulator

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: {platform_a}}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: {platform_b}}}
models:
{models}
breaker: {breaker}
gateway: {{max_queue_depth: 100000}}
orgs:
  bench:
    keys: [{{name: bench, key: {key}}}]
  tenant-a:
    provider_keys: {{sim-a: {revoked}}}
    keys: [{{name: a, key: {key_a}, settings: {{key_mode: own_only}}}}]
  tenant-b:
    keys: [{{name: b, key: {key_b}}}]
"""


def log(message: str) -> None:
    """Progress on stderr (stdout carries only the JSON results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Gateway:
    """One running fleet."""

    base_url: str
    sim_url: str
    fleet: Fleet
    max_retries: int

    def client(self, key: str = KEY, timeout_s: float = 60.0) -> openai.AsyncOpenAI:
        """An SDK client that never retries by itself."""
        return openai.AsyncOpenAI(base_url=f"{self.base_url}/v1", api_key=key, max_retries=0, timeout=timeout_s)

    async def sim_log(self, model: str) -> list[dict[str, Any]]:
        """The simulator's log entries for upstream `model`, in arrival order."""
        async with httpx.AsyncClient(timeout=10) as http:
            resp = await http.get(f"{self.sim_url}/sim/log", params={"model": model})
            resp.raise_for_status()
            entries: list[dict[str, Any]] = resp.json()
            return entries

    async def sim_consume(self, model: str, count: int) -> list[int]:
        """Send `count` requests straight to the simulator for upstream `model` (with `DRAIN_KEY`).

        They advance the model's scenario like gateway calls do, so a
        harness can use up the failure steps the gateway left unconsumed;
        they show in `/sim/log` under `DRAIN_KEY`'s fingerprint.

        Returns:
            The statuses the simulator answered, in order.
        """
        body = {"model": model, "messages": [{"role": "user", "content": "drain"}], "max_tokens": 1}
        headers = {"authorization": f"Bearer {DRAIN_KEY}"}
        async with httpx.AsyncClient(timeout=10) as http:
            return [
                (await http.post(f"{self.sim_url}/v1/chat/completions", json=body, headers=headers)).status_code
                for _ in range(count)
            ]


@contextlib.contextmanager
def fleet_for(models: str, breaker: dict[str, Any], workers: int, seed: int, keep: bool) -> Iterator[Gateway]:
    """Start redis, simulator, workers and ingress for `models`; stop them all on exit.

    Raises:
        turnout.errors.ConfigError: the YAML (e.g. a `--breaker` field) is invalid.
        TimeoutError: a process did not come up.
    """
    fleet = Fleet()
    ok = False
    try:
        _, redis_url = fleet.redis()
        os.environ["TURNOUT_SIM_SEED"] = str(seed)  # Fleet.sim passes our environment on
        _, sim_url = fleet.sim()
        path = fleet.workdir / "turnout.yaml"
        path.write_text(
            CONFIG.format(
                sim=sim_url,
                models=models,
                breaker=json.dumps(breaker),
                key=KEY,
                key_a=KEY_TENANT_A,
                key_b=KEY_TENANT_B,
                platform_a=PLATFORM_KEY_A,
                platform_b=PLATFORM_KEY_B,
                revoked=REVOKED_KEY,
            )
        )
        config = load_config(path)
        env = {"TURNOUT_METRICS_PORT": "0", "TURNOUT_SECRET_KEY": Fernet.generate_key().decode()}  # seals BYOK keys
        for i in range(workers):
            fleet.worker(path, redis_url, name=f"worker-{i}", env=env)
        _, base = fleet.ingress(path, redis_url, env=env)
        log(f"fleet up: ingress {base}, simulator {sim_url}, logs in {fleet.workdir}")
        yield Gateway(base_url=base, sim_url=sim_url, fleet=fleet, max_retries=config.policy.retry.max_retries)
        ok = True
    finally:
        fleet.stop_all()
        if ok and not keep:
            shutil.rmtree(fleet.workdir, ignore_errors=True)
