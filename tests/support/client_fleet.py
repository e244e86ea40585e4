"""The fleet the client helpers' tests drive (Python: tests/integration/test_client_helper.py;
TypeScript: tests/integration/test_client_helper_ts.py, whose node tests in
clients/typescript/test/fleet.test.ts name the same models).

Models: `ok` (served by sim-a), `down-primary` (its first offer answers 503, its second
serves: a fallback), `all-fail` (both offers fail: the gateway's chain is exhausted, 502;
500 for `KEY_LAST`).
The breaker never opens, so every test sees the same attempts.
"""

from __future__ import annotations

from collections.abc import Iterator

from support.gateway import Gateway, running_gateway

KEY = "tk-test-client-helper-001"
KEY_LAST = "tk-test-client-helper-last"
"""A key whose policy answers an exhausted plan with the last attempt's own error
(`fallback.on_exhausted: last`): `all-fail` then answers 500, not 502."""

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b}}
models:
  ok:           {{offers: [{{provider: sim-a, model: ch-ok}}]}}
  down-primary:
    order: priority
    offers: [{{provider: sim-a, model: "ch-dp-a~503"}}, {{provider: sim-b, model: ch-dp-b}}]
  all-fail:
    order: priority
    offers: [{{provider: sim-a, model: "ch-af-a~503"}}, {{provider: sim-b, model: "ch-af-b~500"}}]
policy:
  retry: {{base_ms: 250, max_ms: 1000}}
breaker: {{consecutive_failures: 1000, sole_consecutive_failures: 1000, failure_rate: 1.0, sole_failure_rate: 1.0}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
      - {{name: last, key: {key_last}, settings: {{policy: {{fallback: {{on_exhausted: last}}}}}}}}
"""


def client_fleet() -> Iterator[Gateway]:
    """Its own fleet (redis-server, simulator, ingress, one worker): the tests count simulator
    calls and must not share targets (or breakers). For a module-scoped fixture."""
    with running_gateway(CONFIG, key=KEY, key_last=KEY_LAST) as gateway:
        yield gateway
