"""Budgets as ceilings and `tpm` settled by usage (issue #40, items 1 and 4), against a real fleet.

Its own fleet (Redis, simulator, one worker, one ingress); the official `openai` and
`anthropic` SDKs with retries off, so every 429 is seen as sent. Each request to `pricey`
costs exactly $0.20 (10 output tokens at $20,000 per Mtok, input free) and its worst case is
the same $0.20 (`max_tokens` 10); a hard budget of $0.90 a day has room for 4 of them.
Before #40 the ledger was read at admission and written when attempts ended: 50 concurrent
requests were all served (about $10 spent of a $1 budget).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
import redis

from support.gateway import Gateway, running_gateway
from turnout.core.spend import period_id
from turnout.state import keys

pytestmark = pytest.mark.integration

KEYS = {
    "queued": "tk-test-budget-queued-001",
    "streams": "tk-test-budget-streams-01",
    "messages": "tk-test-budget-messages-1",
    "tpm": "tk-test-budget-tpm-000001",
    "tpm-stream": "tk-test-budget-tpm-stream",
    "replays": "tk-test-budget-replays-01",
}
BUDGET_USD = 0.9
WORST_USD = 0.2
CONCURRENT = 50

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  sim-anth: {{kind: anthropic, base_url: "{sim}", api_key: key-anth}}
models:
  pricey: {{offers: [{{provider: sim-a, model: "pricey~200i40+300ms", output_usd_per_mtok: 20000}}]}}
  pricey-anth: {{offers: [{{provider: sim-anth, model: "pricey-anth~200+300ms", output_usd_per_mtok: 20000}}]}}
  long: {{offers: [{{provider: sim-a, model: "long~len2000"}}]}}
orgs:
  acme:
    keys:
      - {{name: queued, key: {queued}, settings: {{budget: {{usd: 0.9, period: day, hard: true}}}}}}
      - {{name: streams, key: {streams}, settings: {{budget: {{usd: 0.9, period: day, hard: true}}}}}}
      - {{name: messages, key: {messages}, settings: {{budget: {{usd: 0.9, period: day, hard: true}}}}}}
      - {{name: tpm, key: {tpm}, settings: {{limits: {{tpm: 1000}}}}}}
      - {{name: tpm-stream, key: {tpm_stream}, settings: {{limits: {{tpm: 1000}}}}}}
      - {{name: replays, key: {replays}, settings: {{budget: {{usd: 0.9, period: day, hard: true}}, limits: {{tpm: 100000}}}}}}
"""

HELLO: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def budget_gw() -> Iterator[Gateway]:
    fields: dict[str, Any] = {k.replace("-", "_"): v for k, v in KEYS.items()}  # the template's key fields
    with running_gateway(CONFIG, **fields) as gateway:
        yield gateway


def _spent(gw: Gateway, key_name: str) -> float:
    """The key's spend today in the ledger, USD, once the ledger has settled (flushes every 0.25 s)."""
    with redis.Redis.from_url(gw.redis_url) as store:
        ledger = keys.spend_key("acme", "day", period_id("day", time.time()))
        last, deadline = -1.0, time.monotonic() + 10
        while True:
            time.sleep(0.6)
            now = float(store.hget(ledger, f"key:{key_name}") or 0)
            if now == last or time.monotonic() > deadline:
                return now
            last = now


def _settled_in_s(gw: Gateway, key_name: str) -> float:
    """Seconds from now until the key's budget holds no reservation (the answers are in; exact
    settlement removes each with its cost in the next ledger write, every 0.25 s: before it,
    every reservation stayed 10 s after its answer)."""
    start = time.monotonic()
    set_key = keys.reservation_key("acme", f"key:{key_name}", "day", period_id("day", time.time()))
    with redis.Redis.from_url(gw.redis_url) as store:
        while store.zcard(set_key) and time.monotonic() - start < 15:
            time.sleep(0.02)
    return time.monotonic() - start


def _burst(call: Callable[[], int]) -> list[int]:
    """`CONCURRENT` calls at once; their statuses."""
    with concurrent.futures.ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(lambda _: call(), range(CONCURRENT)))


def _check(gw: Gateway, key_name: str, statuses: list[int], upstream_model: str) -> None:
    settled_s = _settled_in_s(gw, key_name)
    spent = _spent(gw, key_name)
    served = statuses.count(200)
    print(
        f"\n{key_name}: {served}/{CONCURRENT} served, ${spent:.2f} spent of a ${BUDGET_USD} budget, "
        f"reservations gone {settled_s:.2f} s after the last answer"
    )
    assert settled_s < 3  # the next ledger write, not the 10 s fallback hold
    assert set(statuses) <= {200, 429}, statuses
    assert 1 <= served <= 4, statuses
    assert spent <= BUDGET_USD + WORST_USD + 1e-9
    assert spent == pytest.approx(served * WORST_USD)
    assert len(gw.sim_log(upstream_model)) == served  # a refused request made no upstream call


def test_budget_50_concurrent_queued_requests_spend_at_most_the_budget_plus_one_worst_case(budget_gw: Gateway) -> None:
    client = budget_gw.client(KEYS["queued"])

    def one() -> int:
        try:
            return client.chat.completions.with_raw_response.create(
                model="pricey", messages=HELLO, max_tokens=10
            ).http_response.status_code
        except openai.APIStatusError as exc:
            assert exc.status_code != 429 or exc.code == "budget_exceeded", exc.message
            return exc.status_code

    _check(budget_gw, "queued", _burst(one), "pricey~200i40+300ms")


def test_budget_50_concurrent_streams_spend_at_most_the_budget_plus_one_worst_case(budget_gw: Gateway) -> None:
    client = budget_gw.client(KEYS["streams"])
    before = len(budget_gw.sim_log("pricey~200i40+300ms"))

    def one() -> int:
        try:
            with client.chat.completions.create(
                model="pricey", messages=HELLO, max_tokens=10, stream=True, stream_options={"include_usage": True}
            ) as stream:
                for _ in stream:
                    pass
            return 200
        except openai.APIStatusError as exc:
            assert exc.status_code != 429 or exc.code == "budget_exceeded", exc.message
            return exc.status_code

    statuses = _burst(one)
    settled_s = _settled_in_s(budget_gw, "streams")
    spent = _spent(budget_gw, "streams")
    served = statuses.count(200)
    print(
        f"\nstreams: {served}/{CONCURRENT} served, ${spent:.2f} spent of a ${BUDGET_USD} budget, "
        f"reservations gone {settled_s:.2f} s after the last answer"
    )
    assert settled_s < 3  # the next ledger write, not the 10 s fallback hold
    assert set(statuses) <= {200, 429} and 1 <= served <= 4, statuses
    assert spent <= BUDGET_USD + WORST_USD + 1e-9
    assert len(budget_gw.sim_log("pricey~200i40+300ms")) - before == served


def test_budget_50_concurrent_anthropic_messages_spend_at_most_the_budget_plus_one_worst_case(
    budget_gw: Gateway,
) -> None:
    client = anthropic.Anthropic(base_url=budget_gw.base_url, api_key=KEYS["messages"], max_retries=0)

    def one() -> int:
        try:
            return client.messages.with_raw_response.create(
                model="pricey-anth", max_tokens=10, messages=HELLO
            ).http_response.status_code
        except anthropic.APIStatusError as exc:
            if exc.status_code == 429:
                assert exc.body["error"]["type"] == "rate_limit_error", exc.body  # type: ignore[index]
                assert "budget" in exc.message
            return exc.status_code

    try:
        _check(budget_gw, "messages", _burst(one), "pricey-anth~200+300ms")
    finally:
        client.close()


def _tpm_run(gw: Gateway, key: str, *, stream: bool) -> tuple[list[int], int]:
    """6 requests without `max_tokens` to `long` (2,000 tokens each) under `tpm: 1000`, one
    every 0.3 s: their statuses and the tokens the served ones used."""
    client = gw.client(KEYS[key])
    statuses, used = [], 0
    for _ in range(6):
        try:
            if stream:
                with client.chat.completions.create(
                    model="long", messages=HELLO, stream=True, stream_options={"include_usage": True}
                ) as events:
                    for event in events:
                        used += event.usage.total_tokens if event.usage else 0
            else:
                answer = client.chat.completions.create(model="long", messages=HELLO)
                used += answer.usage.total_tokens if answer.usage else 0
            statuses.append(200)
        except openai.RateLimitError as exc:
            assert exc.code == "rate_limit_exceeded" and "tpm" in exc.message
            statuses.append(429)
        time.sleep(0.3)  # the usage is charged just after the answer
    return statuses, used


@pytest.mark.parametrize("stream", [False, True], ids=["queued", "streams"])
def test_tpm_is_settled_by_usage_so_requests_without_max_tokens_stay_bounded(budget_gw: Gateway, stream: bool) -> None:
    """Each answer uses 2,000 tokens though its estimate is about 20: the first is admitted,
    its usage leaves the bucket in debt (about a minute), so the next five wait (before #40:
    6 served, 12,000 tokens in a few seconds)."""
    statuses, used = _tpm_run(budget_gw, "tpm-stream" if stream else "tpm", stream=stream)
    print(f"\ntpm 1000 ({'streams' if stream else 'queued'}): {statuses.count(200)}/6 served, {used} tokens used")
    assert statuses == [200] + [429] * 5
    assert used <= 1000 + 2_100  # the limit plus one request


def test_an_idempotent_replay_holds_no_budget_and_no_tpm_once_answered(budget_gw: Gateway) -> None:
    """A replay (same `Idempotency-Key`) is admitted like any request, then answered from its key's
    request without an upstream call: its reservation leaves with no cost in the next ledger
    write and its `tpm` estimate comes back (found by a new user: both stayed held ~30 s)."""
    client = budget_gw.client(KEYS["replays"])
    sent = {"model": "pricey", "messages": HELLO, "max_tokens": 10}
    first = client.chat.completions.with_raw_response.create(**sent, extra_headers={"Idempotency-Key": "replay-1"})
    first_left = int(first.headers["x-ratelimit-remaining-tokens"])
    for _ in range(3):
        again = client.chat.completions.with_raw_response.create(**sent, extra_headers={"Idempotency-Key": "replay-1"})
        assert again.headers["x-turnout-idempotent-replay"] == "1"
    assert _settled_in_s(budget_gw, "replays") < 3  # the ledger's next write, not the lease's expiry
    assert _spent(budget_gw, "replays") == pytest.approx(WORST_USD)  # one upstream call, paid once
    probe = client.chat.completions.with_raw_response.create(**sent)
    probe_left = int(probe.headers["x-ratelimit-remaining-tokens"])
    used = first.parse().usage
    assert used is not None
    # the probe's own estimate and two answers' usage are gone from the bucket, not four estimates
    assert first_left - probe_left <= 2 * used.total_tokens + 100, (first_left, probe_left, used)
