"""The seeds' two stream sentences no fleet test had checked (issue #45 item 10), through the whole
fleet with the official `openai` SDK streaming:

- seed 000: a stream parse error falls over to the next provider at once, without a retry: an
  upstream whose first content event cannot be parsed gets no retry;
  the next provider serves the stream.
- seed 003: a stalled stream (no chunks, no abort) is retried on the same model when
  `maxStallRetries` opts in: by default a stream that sends nothing before the
  first-token limit falls over at once (a timeout, SPEC §3); a policy that opts in with
  `retry.stall_retries` re-sends it to the same target (before: no way to say it — a listed 504
  is never matched by a timeout that received no status).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.gateway import BREAKER_OFF, SIM_PROVIDERS, Gateway, running_gateway, template_flow

pytestmark = pytest.mark.integration

KEY = "tk-seed-streams-00000001"
KEY_STALL = "tk-seed-streams-stall-01"

WATCHDOG = {"ttft_timeout_ms": 500, "stall_timeout_ms": 500}
"""The stream watchdog of both keys: nothing for 0.5 s before the first token, or between chunks, ends
the attempt."""
STALL_RETRIES = {"retry": {**WATCHDOG, "stall_retries": 2, "base_ms": 0}}
"""seed 003's opt-in stall retries (`maxStallRetries`)."""


CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  parse: {{order: priority, offers: [{{provider: sim-a, model: "pe-a~badchunk1"}}, {{provider: sim-b, model: pe-b}}]}}
  stall: {{order: priority, offers: [{{provider: sim-a, model: "st-a~stall0,200"}}, {{provider: sim-b, model: st-b}}]}}
  stall-opt: {{order: priority, offers: [{{provider: sim-a, model: "so-a~stall0,200"}}, {{provider: sim-b, model: so-b}}]}}
"""
    + "policy: {{retry: WATCHDOG}}\n".replace("WATCHDOG", template_flow({**WATCHDOG, "base_ms": 0}))
    + BREAKER_OFF
    + """
orgs:
  acme:
    keys:
      - {{name: main, key: KEY}}
      - {{name: stall, key: KEY_STALL, settings: {{policy: STALL_RETRIES}}}}
""".replace("KEY_STALL", KEY_STALL)
    .replace("KEY", KEY)
    .replace("STALL_RETRIES", template_flow(STALL_RETRIES))
)


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with running_gateway(CONFIG) as gw:
        yield gw


def _stream(gw: Gateway, model: str, key: str) -> tuple[str, dict[str, str]]:
    """Stream `model` with the SDK; the text and the answer's headers."""
    with gw.client(key).chat.completions.with_streaming_response.create(
        model=model, messages=[{"role": "user", "content": "hello"}], stream=True
    ) as response:
        text = "".join(chunk.choices[0].delta.content or "" for chunk in response.parse() if chunk.choices)
        return text, dict(response.headers)


def _statuses(gw: Gateway, model: str) -> list[object]:
    return [entry["status"] for entry in gw.sim_log(model)]


def test_a_stream_parse_error_moves_to_the_next_provider_without_a_retry(gateway: Gateway) -> None:
    """seed 000: a malformed first event is a `malformed` failure, `fallback_now`: one attempt on the
    first provider, none repeated, and the second provider's stream is the client's."""
    text, headers = _stream(gateway, "parse", KEY)
    assert text and len(gateway.sim_log("pe-a~badchunk1")) == 1
    assert _statuses(gateway, "pe-b") == [200]
    assert (headers["x-turnout-provider"], headers["x-turnout-attempts"]) == ("sim-b", "2")


def test_a_stall_before_the_first_token_falls_over_by_default(gateway: Gateway) -> None:
    """The default policy: a stream that sends nothing within `ttft_timeout_ms` is a timeout,
    which falls over at once (seed 000's "Timeout: skip retry")."""
    text, headers = _stream(gateway, "stall", KEY)
    assert text and len(gateway.sim_log("st-a~stall0,200")) == 1
    assert headers["x-turnout-provider"] == "sim-b" and headers["x-turnout-attempts"] == "2"


def test_stall_retries_on_the_same_model_are_opt_in(gateway: Gateway) -> None:
    """seed 003's `maxStallRetries`: with `retry.stall_retries`, the stalled stream is re-sent to the
    same target, whose second answer serves; the other provider is never asked."""
    text, headers = _stream(gateway, "stall-opt", KEY_STALL)
    assert text and len(gateway.sim_log("so-a~stall0,200")) == 2
    assert gateway.sim_log("so-b") == []
    assert headers["x-turnout-provider"] == "sim-a" and headers["x-turnout-attempts"] == "2"
