"""Limits per org, squad and key at the ingress (SPEC §10), against a real fleet.

Its own fleet (Redis, simulator, one worker, one ingress); the official
`openai` SDK with `max_retries=0`, so every 429 is seen as sent.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

pytestmark = pytest.mark.integration

KEYS = {
    "ten": "tk-test-limit-ten-000001",
    "sibling": "tk-test-limit-sibling-01",
    "conc": "tk-test-limit-conc-00001",
    "stream": "tk-test-limit-stream-001",
    "ceil": "tk-test-limit-ceil-00001",
    "shared-a": "tk-test-limit-shared-a01",
    "shared-b": "tk-test-limit-shared-b01",
    "tokens": "tk-test-limit-tokens-001",
    "anth": "tk-test-limit-anth-00001",
    "leave": "tk-test-limit-leave-0001",
}

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  ok:   {{offers: [{{provider: sim-a, model: ok}}]}}
  slow: {{offers: [{{provider: sim-a, model: "slow~200+1500ms"}}]}}
  slow-stream: {{offers: [{{provider: sim-a, model: "sls~200i300"}}]}}
orgs:
  acme:
    squads:
      capped: {{settings: {{limits: {{max_tokens: 100, max_n: 1}}}}}}
    keys:
      - {{name: ten, key: {ten}, settings: {{limits: {{rpm: 10}}}}}}
      - {{name: sibling, key: {sibling}}}
      - {{name: conc, key: {conc}, settings: {{limits: {{max_concurrent: 2}}}}}}
      - {{name: stream, key: {stream}, settings: {{limits: {{max_streams: 1}}}}}}
      - {{name: ceil, key: {ceil}, squad: capped}}
      - {{name: tokens, key: {tokens}, settings: {{limits: {{tpm: 1000}}}}}}
      - {{name: anth, key: {anth}, settings: {{limits: {{rpm: 1}}}}}}
      - {{name: leave, key: {leave}, settings: {{limits: {{max_streams: 1}}}}}}
  beta:
    settings: {{limits: {{rpm: 4}}}}
    keys:
      - {{name: a, key: {shared_a}}}
      - {{name: b, key: {shared_b}}}
"""

HELLO: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def limits_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        fields: dict[str, Any] = {k.replace("-", "_"): v for k, v in KEYS.items()}  # the template's key fields
        gw = start_gateway(fleet, CONFIG, **fields)
        yield gw
        gw.close()
    finally:
        fleet.stop_all()


def _ask(gw: Gateway, key: str, model: str = "ok", **extra: Any) -> httpx2.Response:
    raw = gw.client(KEYS[key]).chat.completions.with_raw_response
    try:
        return raw.create(model=model, messages=HELLO, **extra).http_response
    except openai.APIStatusError as exc:
        return exc.response


def test_limits_rpm_10_key_admits_10_then_429_with_retry_after_and_sibling_unaffected(limits_gw: Gateway) -> None:
    answers = [_ask(limits_gw, "ten") for _ in range(14)]
    statuses = [a.status_code for a in answers]
    assert statuses == [200] * 10 + [429] * 4
    first = answers[0].headers
    assert first["x-ratelimit-limit-requests"] == "10"
    assert first["x-ratelimit-remaining-requests"] == "9"
    assert first["x-ratelimit-reset-requests"] == "6s"
    refused = answers[10]
    assert 1 <= int(refused.headers["retry-after"]) <= 6
    assert 0 < int(refused.headers["retry-after-ms"]) <= 6_000
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    error = refused.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert "rpm" in error["message"] and "key acme/ten" in error["message"]
    assert [_ask(limits_gw, "sibling").status_code for _ in range(12)] == [200] * 12


def test_limits_org_rpm_is_shared_by_its_keys(limits_gw: Gateway) -> None:
    statuses = [_ask(limits_gw, k).status_code for k in ("a", "b", "a", "b", "a", "b") for k in [f"shared-{k}"]]
    assert statuses == [200] * 4 + [429] * 2
    assert "org beta" in _ask(limits_gw, "shared-b").json()["error"]["message"]


def test_limits_max_concurrent_refuses_the_third_in_flight_then_frees_slots(limits_gw: Gateway) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(_ask, limits_gw, "conc", "slow") for _ in range(2)]
        time.sleep(0.5)
        third = _ask(limits_gw, "conc", "slow")
        assert [f.result().status_code for f in slow] == [200, 200]
    assert third.status_code == 429
    assert "max_concurrent" in third.json()["error"]["message"]
    assert third.headers["retry-after"] == "1"
    assert _ask(limits_gw, "conc").status_code == 200  # released when answered, not at lease expiry


def test_limits_max_streams_holds_the_slot_until_the_stream_ends(limits_gw: Gateway) -> None:
    client = limits_gw.client(KEYS["stream"])
    stream = client.chat.completions.create(model="slow-stream", messages=HELLO, stream=True)
    first = next(iter(stream))
    assert first is not None
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="slow-stream", messages=HELLO, stream=True)
    assert "max_streams" in refused.value.message
    assert _ask(limits_gw, "stream").status_code == 200  # a non-streaming request is not a stream
    for _ in stream:
        pass
    stream.close()
    # The slot is given back once the ingress has sent the stream's end, a moment after the client read it:
    # wait for that (bounded), rather than racing it.
    deadline = time.monotonic() + 10
    while True:
        try:
            again = client.chat.completions.create(model="slow-stream", messages=HELLO, stream=True)
            break
        except openai.RateLimitError:
            assert time.monotonic() < deadline, "the stream's slot was never given back"
            time.sleep(0.05)
    again.close()


def test_limits_ceilings_refuse_max_tokens_and_n_above_them_with_400(limits_gw: Gateway) -> None:
    assert _ask(limits_gw, "ceil", max_tokens=100).status_code == 200
    over = _ask(limits_gw, "ceil", max_tokens=101)
    assert over.status_code == 400
    assert over.json()["error"]["param"] == "max_tokens"
    assert "100" in over.json()["error"]["message"] and "squad acme/capped" in over.json()["error"]["message"]
    n = _ask(limits_gw, "ceil", n=2)
    assert (n.status_code, n.json()["error"]["param"]) == (400, "n")


def test_limits_tpm_counts_estimated_tokens_and_refuses_a_request_that_never_fits(limits_gw: Gateway) -> None:
    ok = _ask(limits_gw, "tokens", max_tokens=400)
    assert ok.status_code == 200
    assert int(ok.headers["x-ratelimit-remaining-tokens"]) < 600
    never = _ask(limits_gw, "tokens", max_tokens=5_000)
    assert never.status_code == 429
    assert never.headers["x-should-retry"] == "false" and "retry-after" not in never.headers
    later = _ask(limits_gw, "tokens", max_tokens=700)
    assert later.status_code == 429 and int(later.headers["retry-after"]) >= 1


def test_limits_apply_to_the_anthropic_route_in_its_error_shape(limits_gw: Gateway) -> None:
    client = anthropic.Anthropic(base_url=limits_gw.base_url, api_key=KEYS["anth"], max_retries=0)
    try:
        ok = client.messages.with_raw_response.create(model="ok", max_tokens=20, messages=HELLO)
        assert ok.http_response.headers["x-ratelimit-remaining-requests"] == "0"
        with pytest.raises(anthropic.RateLimitError) as refused:
            client.messages.create(model="ok", max_tokens=20, messages=HELLO)
        assert refused.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
        assert int(refused.value.response.headers["retry-after"]) >= 50
    finally:
        client.close()


def test_limits_stream_slot_is_freed_when_its_client_leaves_mid_stream(limits_gw: Gateway) -> None:
    body = {"model": "slow-stream", "messages": HELLO, "stream": True}
    headers = {"authorization": f"Bearer {KEYS['leave']}"}
    with httpx.Client(base_url=limits_gw.base_url, timeout=30) as client:
        with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
            assert response.status_code == 200
            next(response.iter_lines())
        # the client left after the first line; the slot frees without waiting for the lease to expire
        deadline = time.monotonic() + 5
        while True:
            with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as again:
                if again.status_code == 200 or time.monotonic() > deadline:
                    break
            time.sleep(0.2)
        assert again.status_code == 200
