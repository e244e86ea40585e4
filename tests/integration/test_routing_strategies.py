"""Routing strategies on a real fleet (SPEC §10), with the official `openai` SDK.

One ingress and one worker share Redis; the simulator serves every offer.
Offer prices are the catalog's; latency is the fleet's own measure
(`turnout:speed:*`), taken from the attempts these tests make.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import redis

from support.gateway import SIM_PROVIDERS, Gateway, running_gateway
from support.malformed_provider import MALFORMED_PROVIDERS

pytestmark = pytest.mark.integration

KEY = "tk-test-strategies-000001"
KEY_NO_RETRY = "tk-test-strategies-noretry"
KEY_FIVE = "tk-test-strategies-five-01"
KEY_REROUTED = "tk-test-strategies-rr-0001"
KEY_PLAN_CAP = "tk-test-strategies-cap-001"
KEY_SPENDER = "tk-test-strategies-spend01"
KEY_ADMIN = "tk-test-strategies-admin01"
KEY_TIERED = "tk-test-strategies-tiered1"
KEY_HARD = "tk-test-strategies-hard001"
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]

CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  cheap-healthy:
    order: price
    offers:
      - {{provider: sim-a, model: ph-dear, input_usd_per_mtok: 30, output_usd_per_mtok: 60}}
      - {{provider: sim-b, model: ph-cheap, input_usd_per_mtok: 0.10, output_usd_per_mtok: 0.20}}
  cheap-failing:
    order: price
    offers:
      - {{provider: sim-a, model: pf-dear, input_usd_per_mtok: 30, output_usd_per_mtok: 60}}
      - {{provider: sim-b, model: "pf-cheap~503", input_usd_per_mtok: 0.10, output_usd_per_mtok: 0.20}}
  fast-slow:
    order: latency
    offers: [{{provider: sim-a, model: "lat-slow~200+250ms"}}, {{provider: sim-b, model: lat-fast}}]
  five-failing:
    order: priority
    offers:
      - {{provider: sim-a, model: "mo1~503"}}
      - {{provider: sim-b, model: "mo2~503"}}
      - {{provider: sim-a, model: "mo3~503"}}
      - {{provider: sim-b, model: "mo4~503"}}
      - {{provider: sim-a, model: "mo5~503"}}
  prefs:
    order: priority
    offers: [{{provider: sim-b, model: pr-dear, input_usd_per_mtok: 5, output_usd_per_mtok: 5}},
             {{provider: sim-a, model: pr-cheap, input_usd_per_mtok: 1, output_usd_per_mtok: 1}}]
  prefs-failing:
    order: priority
    offers: [{{provider: sim-a, model: "pff-a~503"}}, {{provider: sim-b, model: pff-b}}]
  prefs-open:
    order: priority
    offers: [{{provider: sim-a, model: "po-a~503"}}, {{provider: sim-b, model: po-b}}]
  only-a:          {{offers: [{{provider: sim-a, model: only-a}}]}}
  capped:          {{offers: [{{provider: sim-a, model: "cap-a~usagecap3s,200"}}]}}
  covered:         {{offers: [{{provider: sim-b, model: covered-b}}]}}
  st-premium:      {{offers: [{{provider: sim-a, model: st-premium, output_usd_per_mtok: 100000}}]}}
  st-small:        {{offers: [{{provider: sim-a, model: "st-small~503"}}]}}
  st-tiny:         {{offers: [{{provider: sim-b, model: st-tiny}}]}}
gateway: {{records_max: 1000}}
orgs:
  acme:
    squads: {{research: {{}}}}
    keys:
      - {{name: spender, squad: research, key: {key_spender}}}
      - {{name: admin, key: {key_admin}, admin: true}}
      - name: tiered
        key: {key_tiered}
        settings:
          reroutes: [only-a]
          budget: {{usd: 4, period: day}}
          strategy: [{{name: economy, at_percent: 50, model: st-small, fallback: st-tiny}}]
      - {{name: hard, key: {key_hard}, settings: {{budget: {{usd: 1.5, period: month, hard: true}}}}}}
      - {{name: rerouted, key: {key_rerouted}, settings: {{reroutes: [only-a]}}}}
      - {{name: plan-cap, key: {key_plan_cap}, settings: {{plan_fallbacks: {{capped: [covered]}}}}}}
      - {{name: main, key: {key}}}
      - {{name: no-retry, key: {key_no_retry}, settings: {{policy: {{retry: {{max_retries: 0}}}}}}}}
      - name: five
        key: {key_five}
        settings: {{policy: {{retry: {{max_retries: 0}}, plan: {{max_offers: 5}}}}}}
"""
)


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with running_gateway(
        CONFIG,
        env={"TURNOUT_METRICS_PORT": "0"},
        key=KEY,
        key_no_retry=KEY_NO_RETRY,
        key_five=KEY_FIVE,
        key_rerouted=KEY_REROUTED,
        key_plan_cap=KEY_PLAN_CAP,
        key_spender=KEY_SPENDER,
        key_admin=KEY_ADMIN,
        key_tiered=KEY_TIERED,
        key_hard=KEY_HARD,
    ) as gateway:
        yield gateway


def _client(gw: Gateway, key: str = KEY) -> openai.OpenAI:
    """The fleet's SDK client for `key` (one per key, closed with the fleet)."""
    return gw.client(key)


def _served(client: openai.OpenAI, model: str, **extra: Any) -> tuple[int, str | None, int]:
    """(HTTP status, x-turnout-model, x-turnout-attempts) of one request."""
    try:
        raw = client.chat.completions.with_raw_response.create(model=model, messages=MESSAGES, **extra)
        return raw.http_response.status_code, raw.headers.get("x-turnout-model"), int(raw.headers["x-turnout-attempts"])
    except openai.APIStatusError as exc:
        return (
            exc.status_code,
            exc.response.headers.get("x-turnout-model"),
            int(exc.response.headers.get("x-turnout-attempts", "0")),
        )


def test_price_serves_the_cheap_offer_while_it_is_healthy(gw: Gateway) -> None:
    """$0.10/$0.20 against $30/$60 per Mtok: the cheap offer serves ≥ 95 % (issue: 15 of 30)."""
    client = _client(gw)
    served = Counter(_served(client, "cheap-healthy")[1] for _ in range(40))
    assert served["ph-cheap"] >= 38, served


def test_price_moves_off_the_cheap_offer_when_it_fails(gw: Gateway) -> None:
    """The cheap offer answers 503: the first request fails over, and from the
    next one on the dear offer is tried first (one attempt), every request served."""
    client = _client(gw)
    results = [_served(client, "cheap-failing") for _ in range(20)]
    assert all(status == 200 and model == "pf-dear" for status, model, _ in results), results
    assert results[0][2] >= 2  # the first one tried the cheap offer
    assert sum(1 for *_, attempts in results[1:] if attempts == 1) >= 18, results
    assert 1 <= len(gw.sim_log("pf-cheap~503")) <= 4


def test_latency_prefers_the_measured_faster_offer_within_50_requests(gw: Gateway) -> None:
    """Both offers unmeasured at first (ties); the fleet measures each from its
    own attempts, and by the second half of 50 requests the fast one serves
    nearly all (5 % exploration keeps the slow one measured)."""
    client = _client(gw)
    served = [_served(client, "fast-slow")[1] for _ in range(50)]
    late = Counter(served[25:])
    assert late["lat-fast"] >= 21, Counter(served)


def test_plan_max_offers_3_with_five_failing_offers_makes_three_attempts(gw: Gateway) -> None:
    """Five offers that all answer 503, no retries: the default cap of 3 offers
    makes 3 attempts (issue: 6, only max_attempts capped them); a key whose
    policy sets `plan.max_offers: 5` makes 5."""
    status, _, attempts = _served(_client(gw, KEY_NO_RETRY), "five-failing")
    assert (status, attempts) == (502, 3)
    assert [len(gw.sim_log(f"mo{i}~503")) for i in range(1, 6)] == [1, 1, 1, 0, 0]
    status, _, attempts = _served(_client(gw, KEY_FIVE), "five-failing")
    assert (status, attempts) == (502, 5)
    assert [len(gw.sim_log(f"mo{i}~503")) for i in range(1, 6)] == [2, 2, 2, 1, 1]


def _prefs(
    gw: Gateway, model: str, provider: dict[str, Any], key: str = KEY, **extra: Any
) -> tuple[int, str | None, int]:
    return _served(_client(gw, key), model, extra_body={"provider": provider}, **extra)


@pytest.mark.parametrize(
    ("provider", "served"),
    [
        ({}, "pr-dear"),
        ({"only": ["sim-a"]}, "pr-cheap"),
        ({"ignore": ["sim-b"]}, "pr-cheap"),
        ({"max_price": {"prompt": 2}}, "pr-cheap"),
        ({"order": ["sim-a", "sim-b"]}, "pr-cheap"),
        ({"sort": "price"}, "pr-cheap"),
    ],
    ids=["none", "only", "ignore", "max-price", "order", "sort-price"],
)
def test_request_preferences_narrow_and_reorder_the_offers(gw: Gateway, provider: dict[str, Any], served: str) -> None:
    results = {_prefs(gw, "prefs", provider) for _ in range(3)}
    assert results == {(200, served, 1)}


def test_request_preferences_ride_the_streaming_path_too(gw: Gateway) -> None:
    stream = _client(gw).chat.completions.with_raw_response.create(
        model="prefs", messages=MESSAGES, stream=True, extra_body={"provider": {"only": ["sim-a"]}}
    )
    assert stream.headers["x-turnout-model"] == "pr-cheap"
    assert any(chunk.choices for chunk in stream.parse())


def test_request_without_fallbacks_makes_no_fallback(gw: Gateway) -> None:
    assert _prefs(gw, "prefs-failing", {}, KEY)[:2] == (200, "pff-b")
    status, _, attempts = _prefs(gw, "prefs-failing", {"allow_fallbacks": False}, KEY_NO_RETRY)
    assert (status, attempts) == (502, 1)


@pytest.mark.parametrize(
    ("key", "model", "provider"),
    [
        (KEY, "only-a", {"only": ["sim-b"]}),
        (KEY, "prefs", {"max_price": {"prompt": 0.5}}),
        (KEY_REROUTED, "prefs", {"only": ["sim-b"]}),
    ],
    ids=["provider-the-model-lacks", "price-no-offer-meets", "reroute-is-not-undone"],
)
def test_request_preferences_cannot_widen_the_keys_settings(
    gw: Gateway, key: str, model: str, provider: dict[str, Any]
) -> None:
    """A preference can only narrow: a provider the model has no offer on, or
    one only the requested model (replaced by the key's reroute) would reach,
    is never called; the request is refused before any attempt."""
    before = len(gw.sim_log("pr-dear"))
    with pytest.raises(openai.BadRequestError) as info:
        _client(gw, key).chat.completions.create(model=model, messages=MESSAGES, extra_body={"provider": provider})
    assert info.value.code == "no_matching_offer" and info.value.param == "provider"
    assert len(gw.sim_log("pr-dear")) == before


def test_circuit_open_caused_by_the_requests_preferences_says_so(gw: Gateway) -> None:
    """sim-a's offer fails until its breaker opens (each request served by sim-b); then a request
    narrowed to sim-a is a 503 `circuit_open` naming its preferences, and one without them is served."""
    client = _client(gw, KEY_NO_RETRY)
    for _ in range(10):
        status, model, attempts = _served(client, "prefs-open")
        assert (status, model) == (200, "po-b")
        if attempts == 1:  # sim-a skipped: its breaker is open
            break
    else:
        pytest.fail("sim-a's breaker did not open in 10 requests")
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(
            model="prefs-open", messages=MESSAGES, extra_body={"provider": {"only": ["sim-a"]}}
        )
    assert info.value.status_code == 503 and info.value.code == "circuit_open"
    assert "that the request's `provider` preferences allow" in info.value.message
    assert "The preferences left out `sim-b/po-b`" in info.value.message
    assert _served(client, "prefs-open")[:2] == (200, "po-b")
    with pytest.raises(openai.InternalServerError) as pinned:  # pinned to sim-a: the preferences leave out nothing
        client.chat.completions.create(
            model="sim-a/prefs-open", messages=MESSAGES, extra_body={"provider": {"only": ["sim-a"]}}
        )
    assert pinned.value.code == "circuit_open" and "preferences" not in pinned.value.message


def test_request_preferences_honour_only_under_a_reroute(gw: Gateway) -> None:
    assert _prefs(gw, "prefs", {"only": ["sim-a"]}, KEY_REROUTED)[:2] == (200, "only-a")


@pytest.mark.parametrize(("provider", "param"), MALFORMED_PROVIDERS)
def test_request_preferences_are_validated_naming_the_field(gw: Gateway, provider: Any, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _client(gw).chat.completions.create(model="prefs", messages=MESSAGES, extra_body={"provider": provider})
    assert info.value.param == param and info.value.code == "invalid_request"
    assert param in info.value.message


def _records(gw: Gateway, request_id: str, count: int) -> list[dict[str, Any]]:
    """The ended attempt records of one request, once all `count` are flushed (10 s at most)."""
    deadline = time.monotonic() + 10
    with redis.Redis.from_url(gw.redis_url) as client:
        while True:
            rows = [json.loads(f[b"r"]) for _, f in client.xrange("turnout:records")]
            mine = sorted(
                (r for r in rows if r["request_id"] == request_id and r.get("phase") != "started"),
                key=lambda r: r["attempt"],
            )
            if len(mine) >= count or time.monotonic() > deadline:
                return mine
            time.sleep(0.1)


def test_plan_cap_fails_over_once_then_skips_the_capped_target_until_it_resets(gw: Gateway) -> None:
    """The capped model's provider answers 429 "usage limit reached" with a
    3 s reset: the first request fails over to the plan fallback
    (`is_plan_fallback`); the next ones in the window make no call to the
    capped target (one attempt each); after the reset it serves again."""
    client = _client(gw, KEY_PLAN_CAP)
    first = client.chat.completions.with_raw_response.create(model="capped", messages=MESSAGES)
    assert first.headers["x-turnout-model"] == "covered-b"
    assert (first.headers["x-turnout-attempts"], first.headers["x-turnout-plan-fallback"]) == ("2", "1")
    records = _records(gw, first.headers["x-request-id"], 2)
    assert [(r["kind"], r["is_plan_fallback"]) for r in records] == [("quota_exhausted", False), ("success", True)]
    started = time.monotonic()
    later = []
    while time.monotonic() - started < 2.0:
        raw = client.chat.completions.with_raw_response.create(model="capped", messages=MESSAGES)
        later.append(
            (raw.headers["x-turnout-model"], raw.headers["x-turnout-attempts"], raw.headers["x-turnout-plan-fallback"])
        )
    assert len(later) >= 5 and set(later) == {("covered-b", "1", "1")}, later
    assert len(gw.sim_log("cap-a~usagecap3s,200")) == 1  # 0 calls to the capped target in the window
    time.sleep(max(0.0, 3.3 - (time.monotonic() - started)))
    healed = client.chat.completions.with_raw_response.create(model="capped", messages=MESSAGES)
    assert (healed.headers["x-turnout-model"], healed.headers["x-turnout-plan-fallback"]) == (
        "cap-a~usagecap3s,200",
        "0",
    )


def test_spend_ledger_sums_the_records_costs_by_org_squad_and_key(gw: Gateway) -> None:
    """Served attempts' costs (catalog prices × tokens, as the records say) go
    to the UTC month's and day's ledgers of the org, the squad and the key; the
    admin API and `turnout admin spend` show them."""
    client = _client(gw, KEY_SPENDER)
    ids = [
        client.chat.completions.with_raw_response.create(model="prefs", messages=MESSAGES).headers["x-request-id"]
        for _ in range(4)
    ]
    cost = sum(r["cost_usd"] for rid in ids for r in _records(gw, rid, 1))
    assert cost > 0

    def ledger(period: str) -> dict[str, Any]:
        answer = httpx.get(
            f"{gw.base_url}/admin/v1/orgs/acme/spend",
            params={"period": period},
            headers={"authorization": f"Bearer {KEY_ADMIN}"},
        )
        assert answer.status_code == 200, answer.text
        spend: dict[str, Any] = answer.json()["spend"]
        return spend

    deadline = time.monotonic() + 10
    while ledger("month")["keys"].get("spender", 0) < cost - 1e-9 and time.monotonic() < deadline:
        time.sleep(0.1)
    for period in ("month", "day"):
        spend = ledger(period)
        assert spend["keys"]["spender"] == pytest.approx(cost) and spend["squads"]["research"] == pytest.approx(cost)
        assert spend["total_usd"] >= spend["keys"]["spender"]
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnout_cli.main",
            "admin",
            "--url",
            gw.base_url,
            "--key",
            KEY_ADMIN,
            "spend",
            "show",
            "acme",
            "--period",
            "day",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(cli.stdout)["spend"]["keys"]["spender"] == pytest.approx(cost)
    other = httpx.get(f"{gw.base_url}/admin/v1/orgs/globex/spend", headers={"authorization": f"Bearer {KEY_ADMIN}"})
    assert other.status_code == 404  # another org's ledger reads as missing
    for params, param in (({"period": "year"}, "period"), ({"at": "garbage"}, "at")):
        bad = httpx.get(
            f"{gw.base_url}/admin/v1/orgs/acme/spend", params=params, headers={"authorization": f"Bearer {KEY_ADMIN}"}
        )
        assert bad.status_code == 400, bad.text
        assert (bad.json()["error"]["param"], bad.json()["error"]["code"]) == (param, "invalid_value")


def _premium(gw: Gateway, key: str) -> Any:
    """One `st-premium` request of 10 output tokens: $1.00 at $100,000 per Mtok."""
    return _client(gw, key).chat.completions.with_raw_response.create(
        model="st-premium", messages=MESSAGES, max_tokens=10
    )


def test_strategy_rule_switches_the_model_when_the_ledger_crosses_its_threshold(gw: Gateway) -> None:
    """Budget $4 a day, rule `economy` from 50 %: the first two requests
    ($1 each) are served as asked (the key's reroute list is ignored under a
    strategy); from the third the ledger is past $2 and the rule's model
    serves, failing over only to the rule's own fallback, with `is_strategy`."""
    served = []
    for _ in range(4):
        raw = _premium(gw, KEY_TIERED)
        served.append((raw.headers["x-turnout-model"], raw.headers.get("x-turnout-strategy")))
        last_id = raw.headers["x-request-id"]
        time.sleep(0.4)  # the ledger is written every 0.25 s
    assert served == [("st-premium", None)] * 2 + [("st-tiny", "economy")] * 2, served
    records = _records(gw, last_id, 3)
    assert [(r["served_model"], r["is_strategy"], r["strategy"]) for r in records] == [
        ("st-small~503", True, "economy"),
        ("st-small~503", True, "economy"),
        ("st-tiny", True, "economy"),
    ]
    assert not any(r["is_reroute"] for r in records)


def test_hard_budget_answers_429_budget_exceeded_until_the_period_resets(gw: Gateway) -> None:
    """Budget $1.50 a month, hard: a $1 request (its worst case: 10 tokens at $100,000 per
    Mtok) is served; the second, whose worst case is more than the $0.50 left, is refused
    without any upstream call (issue #40: a budget is a ceiling)."""
    assert _premium(gw, KEY_HARD).http_response.status_code == 200
    time.sleep(0.4)
    calls = len(gw.sim_log("st-premium"))
    with pytest.raises(openai.RateLimitError) as info:
        _premium(gw, KEY_HARD)
    assert info.value.code == "budget_exceeded"
    headers = info.value.response.headers
    assert int(headers["retry-after"]) > 0 and headers["x-should-retry"] == "false"
    assert "resets at" in info.value.message
    assert len(gw.sim_log("st-premium")) == calls
