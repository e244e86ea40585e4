"""The integration fleet's configuration and the handle tests use.

Every scenario gets its own catalog model whose simulator model name carries
the fault script (`label~503,200`), so tests never share scenario state.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai

from support.procs import Fleet, require_redis

KEY = "tk-test-main-000000000001"
KEY_WORKED = "tk-test-worked-0000000001"
KEY_DEADLINE = "tk-test-deadline-00000001"
KEY_REROUTE = "tk-test-reroute-000000001"
KEY_ADMIN = "tk-test-admin-00000000001"
KEY_STREAM = "tk-test-stream-0000000001"
KEY_CYCLES = "tk-test-cycles-0000000001"
KEY_RECOVER = "tk-test-recover-000000001"
OPERATOR = "op-test-main-operator-0000001"

SIM_PROVIDERS = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
"""
"""Two simulated providers, as a configuration template's first lines (`{sim}` formatted in later)."""

BREAKER_OFF = (
    "breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0,"
    " sole_failure_rate: 2.0}}"
)
"""A `breaker:` line, in `start_gateway` template form, whose breaker never opens: for tests
that count every attempt or load the fleet, where a trip would hide what they measure."""

ACME_ORG = """
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
"""
"""Org `acme` with its key `main` (`{key}`), as a configuration template's last lines (after
`BREAKER_OFF`); a test adds more keys by appending `      - {{name: ..., key: ...}}` lines."""

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
  sim-nokey: {{kind: openai_compatible, base_url: "{sim}/v1"}}
models:
  ok:              {{offers: [{{provider: sim-a, model: ok}}]}}
  flaky:           {{offers: [{{provider: sim-a, model: "flaky~503,200"}}]}}
  down-primary:
    order: priority
    offers: [{{provider: sim-a, model: "dp-a~503"}}, {{provider: sim-b, model: dp-b}}]
  worked:
    order: priority
    offers: [{{provider: sim-a, model: "we-a~503"}}, {{provider: sim-b, model: we-b}}]
  worked-401:
    order: priority
    offers: [{{provider: sim-a, model: "w401-a~401"}}, {{provider: sim-b, model: w401-b}}]
  bad-400:         {{offers: [{{provider: sim-a, model: "b400~400"}}]}}
  all-fail:
    order: priority
    offers: [{{provider: sim-a, model: "af-a~503"}}, {{provider: sim-b, model: "af-b~500"}}]
  hang:            {{offers: [{{provider: sim-a, model: "hang~hang"}}]}}
  retry-after:     {{offers: [{{provider: sim-a, model: "ra2~429ra2,200"}}]}}
  retry-after-90:
    order: priority
    offers: [{{provider: sim-a, model: "ra90-a~429ra90"}}, {{provider: sim-b, model: ra90-b}}]
  quota:
    order: priority
    offers: [{{provider: sim-a, model: "q-a~quota"}}, {{provider: sim-b, model: q-b}}]
  ctx-small:       {{offers: [{{provider: sim-a, model: "ctx-a~ctx"}}]}}
  ctx-large:       {{offers: [{{provider: sim-b, model: ctx-b}}]}}
  rr-orig:         {{offers: [{{provider: sim-a, model: rr-orig}}]}}
  rr-x:            {{offers: [{{provider: sim-a, model: "rr-x~503"}}]}}
  rr-y:            {{offers: [{{provider: sim-b, model: "rr-y~502"}}]}}
  fb-primary:      {{offers: [{{provider: sim-a, model: "fbp~500"}}]}}
  fb-secondary:    {{offers: [{{provider: sim-b, model: fbs}}]}}
  nokey:
    order: priority
    offers: [{{provider: sim-nokey, model: nk-a}}, {{provider: sim-b, model: nk-b}}]
  cancel:          {{offers: [{{provider: sim-a, model: "cancel~hang"}}]}}
  cycle:
    order: priority
    offers: [{{provider: sim-a, model: "cyc-a~503,200"}}, {{provider: sim-b, model: "cyc-b~502"}}]
  pinned:
    order: priority
    offers: [{{provider: sim-a, model: "pin-a"}}, {{provider: sim-b, model: "pin-b"}}]
  s-ok:            {{offers: [{{provider: sim-a, model: s-ok}}]}}
  s-cont:          {{offers: [{{provider: sim-a, model: "scont~cut20,200"}}]}}
  s-cont-next:
    order: priority
    offers: [{{provider: sim-a, model: "snp~cut20,noprefill"}}, {{provider: sim-b, model: snp-b}}]
  s-cont-none:     {{offers: [{{provider: sim-a, model: "snone~cut20,noprefill"}}]}}
  s-503:
    order: priority
    offers: [{{provider: sim-a, model: "s503~503"}}, {{provider: sim-b, model: s503-b}}]
  s-bodyerr:
    order: priority
    offers: [{{provider: sim-a, model: "sbe~bodyerr429"}}, {{provider: sim-b, model: sbe-b}}]
  s-slow:
    order: priority
    offers: [{{provider: sim-a, model: "sslow~slow3000"}}, {{provider: sim-b, model: sslow-b}}]
  s-cut:           {{offers: [{{provider: sim-a, model: "scut~cut40"}}]}}
  s-stall:         {{offers: [{{provider: sim-a, model: "sstall~stall10"}}]}}
  s-bad:           {{offers: [{{provider: sim-a, model: "sbad~badchunk5"}}]}}
  s-nodone:        {{offers: [{{provider: sim-a, model: "snd~nodone"}}]}}
  s-slowchunks:    {{offers: [{{provider: sim-a, model: "sslowc~200i100"}}]}}
  ops-check:
    order: priority
    offers: [{{provider: sim-a, model: "ops-a~503"}}, {{provider: sim-b, model: ops-b}}]
policy:
  retry: {{base_ms: 250, max_ms: 4000}}
gateway:
  max_body_bytes: 65536
orgs:
  acme:
    settings:
      fallbacks: {{fb-primary: [fb-secondary]}}
      context_window_fallbacks: {{ctx-small: [ctx-large]}}
    keys:
      - {{name: main, key: {key}}}
      - {{name: worked, key: {key_worked}, settings: {{policy: {{budget: {{max_attempts: 4}}}}}}}}
      - {{name: deadline, key: {key_deadline}, settings: {{policy: {{budget: {{max_total_latency_ms: 1500}}}}}}}}
      - {{name: reroute, key: {key_reroute}, settings: {{reroutes: [rr-x, rr-y]}}}}
      - {{name: admin, key: {key_admin}, admin: true}}
      - {{name: recover, key: {key_recover}, settings: {{policy: {{retry: {{stream_recovery: continue}}}}}}}}
      - {{name: cycles, key: {key_cycles}, settings: {{policy: {{retry: {{max_retries: 0}}, fallback: {{max_cycles: 2}}}}}}}}
      - {{name: stream, key: {key_stream}, settings: {{policy: {{retry: {{ttft_timeout_ms: 500, stall_timeout_ms: 500}}}}}}}}
"""


@dataclass
class Gateway:
    """The running fleet as tests see it."""

    base_url: str
    sim_url: str
    redis_url: str
    fleet: Fleet
    clients: dict[str, openai.OpenAI] = field(default_factory=dict)

    def client(self, key: str = KEY) -> openai.OpenAI:
        """The official OpenAI SDK client for `key` (one per key), SDK retries off."""
        if key not in self.clients:
            self.clients[key] = openai.OpenAI(base_url=f"{self.base_url}/v1", api_key=key, max_retries=0)
        return self.clients[key]

    def close(self) -> None:
        """Close the SDK clients."""
        for client in self.clients.values():
            client.close()

    def sim_log(self, model: str) -> list[dict[str, object]]:
        """Attempts the simulator received for upstream `model`."""
        data: list[dict[str, object]] = httpx.get(f"{self.sim_url}/sim/log", params={"model": model}).json()
        return data


def template_flow(value: object) -> str:
    """`value` as YAML flow (JSON) for a `start_gateway` template: braces doubled for its `format`."""
    return json.dumps(value).replace("{", "{{").replace("}", "}}")


def one_model_config(upstream_model: str) -> str:
    """A configuration template with one model `ok` served by `sim-a`'s `upstream_model`, the
    breaker off, and org `acme` with one key `{key}` (format with `sim=` and `key=`)."""
    return (
        SIM_PROVIDERS
        + f"""\
models:
  ok: {{{{offers: [{{{{provider: sim-a, model: {upstream_model}}}}}]}}}}
"""
        + BREAKER_OFF
        + ACME_ORG
    )


def start_gateway(
    fleet: Fleet,
    template: str,
    *,
    workers: int = 1,
    env: dict[str, str] | None = None,
    prepare: Callable[[Path, str], dict[str, str]] | None = None,
    **fields: str,
) -> Gateway:
    """Start Redis, the simulator, `workers` workers and one ingress for `template`.

    `template` is a configuration with `{sim}` (the simulator's base URL) and
    any `fields` to format in; `env` adds variables to the ingress's and the
    workers' environment (e.g. `TURNOUT_OPERATOR_KEY`, `TURNOUT_SECRET_KEY`);
    `prepare(workdir, sim_url)` writes files the configuration names once the
    simulator runs (a service-account key whose token endpoint is the simulator)
    and returns more fields to format in.
    """
    _, redis_url = fleet.redis()
    _, sim_url = fleet.sim()
    config_path = fleet.workdir / "turnout.yaml"
    extra = prepare(fleet.workdir, sim_url) if prepare is not None else {}
    config_path.write_text(template.format(sim=sim_url, **fields, **extra))
    for i in range(workers):
        fleet.worker(config_path, redis_url, name=f"worker-{i}", env=env)
    _, base = fleet.ingress(config_path, redis_url, env=env)
    return Gateway(base_url=base, sim_url=sim_url, redis_url=redis_url, fleet=fleet)


@contextlib.contextmanager
def running_gateway(
    template: str,
    *,
    workers: int = 1,
    env: dict[str, str] | None = None,
    prepare: Callable[[Path, str], dict[str, str]] | None = None,
    **fields: str,
) -> Iterator[Gateway]:
    """`start_gateway` on a fresh `Fleet` (Redis required), stopped on exit."""
    require_redis()
    fleet = Fleet()
    gw: Gateway | None = None
    try:
        gw = start_gateway(fleet, template, workers=workers, env=env, prepare=prepare, **fields)
        yield gw
    finally:
        if gw is not None:
            gw.close()
        fleet.stop_all()
