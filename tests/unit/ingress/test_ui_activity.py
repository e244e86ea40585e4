"""The dashboard's pure views: requests from attempt rows, badges, delays, filters, figures, sparklines."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from turnout_ingress.ui import figures, samples
from turnout_ingress.ui.activity import Filters, attempts, badges, summarize, valid_cursor


def row(attempt: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ts": 1000.0 + attempt,
        "request_id": "r1",
        "org": "acme",
        "squad": "research",
        "key": "ci-bot",
        "requested_model": "chat",
        "served_model": "chat-a",
        "provider": "sim-a",
        "attempt": attempt,
        "status": 503,
        "class": "retry_then_fallback",
        "kind": "server_error",
        "latency_ms": 100.0,
        "cost_usd": 0.0,
        "is_retry": False,
        "is_fallback": False,
        "is_reroute": False,
        "is_byok_fallback": False,
        "is_strategy": False,
        "role": "primary",
    }
    return {**base, **fields}


OK = {"status": 200, "class": "success", "kind": "success"}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([row(1, **OK)], ()),
        ([row(1), row(2, is_retry=True), row(3, is_retry=True, **OK)], ("Retried ×2",)),
        (
            [row(1), row(2, provider="sim-b", is_fallback=True, role="provider_fallback", **OK)],
            ("Retried ×1", "Provider fallback"),
        ),
        (
            [row(1), row(2, served_model="small", is_fallback=True, role="model_fallback", **OK)],
            ("Retried ×1", "Model fallback"),
        ),
        ([row(1), row(2, is_fallback=True, role="context_window_fallback", **OK)], ("Retried ×1", "Model fallback")),
        ([row(1, is_reroute=True, **OK)], ("Reroute",)),
        ([row(1, status=401), row(2, is_byok_fallback=True, **OK)], ("Retried ×1", "BYOK fallback")),
        ([row(1, is_strategy=True, **OK)], ("Strategy",)),
        (
            [row(1, status=429), row(2, is_plan_fallback=True, is_fallback=True, role="model_fallback", **OK)],
            ("Retried ×1", "Model fallback", "Plan fallback"),
        ),
        (
            [row(2, provider="sim-b", is_fallback=True, role=None, **OK), row(1, role=None)],
            ("Retried ×1", "Provider fallback"),
        ),
        (
            [row(1), row(2, is_retry=True), row(3, provider="sim-b", is_fallback=True, role="provider_fallback", **OK)],
            ("Retried ×2", "Provider fallback"),
        ),
        (
            [
                row(1),
                row(2, provider="sim-b", is_fallback=True, role="provider_fallback"),
                row(3, served_model="big-2", is_fallback=True, is_comparable=True, role="comparable_alternate", **OK),
            ],
            ("Retried ×2", "Provider fallback", "Model fallback", "Comparable alternate"),
        ),
    ],
    ids=[
        "served-first",
        "retried-twice",
        "provider-fallback",
        "model-fallback",
        "context-window",
        "reroute",
        "byok",
        "strategy",
        "plan-fallback",
        "no-role-other-provider",
        "mesh-503-503-200-elsewhere",
        "comparable-alternate",
    ],
)
def test_badges_follow_the_record_flags_and_roles(rows: list[dict[str, Any]], expected: tuple[str, ...]) -> None:
    """`Retried ×N` counts every attempt after the first, as seed 002's log row does: 503, 503,
    then 200 on another provider is *Retried ×2* with a *Provider fallback* badge."""
    assert badges(rows) == expected


def test_attempts_in_order_with_recorded_delay_and_reason() -> None:
    rows = [
        row(3, provider="sim-b", is_fallback=True, role="provider_fallback", delay_before_s=0.0, **OK),
        row(1, delay_before_s=0.0),
        row(2, is_retry=True, delay_before_s=0.25, delay_reason="backoff"),
    ]
    got = attempts(rows)
    assert [a.number for a in got] == [1, 2, 3]
    assert got[1].delay_before_ms == 250.0
    assert got[1].delay_why == "backoff (full jitter) after retry_then_fallback 503"
    assert got[2].delay_why == "fallback after retry_then_fallback 503"
    assert got[2].flags == ("fallback",)
    assert got[0].delay_why == ""


def test_attempts_without_recorded_delay_use_the_gap_between_attempts() -> None:
    got = attempts([row(1, ts=10.0, latency_ms=100.0), row(2, ts=10.6, is_retry=True, **OK)])
    assert got[1].delay_before_ms == pytest.approx(500.0)
    assert got[1].delay_why == "retry after retry_then_fallback 503"


def test_summary_spans_first_start_to_last_end_and_sums_cost() -> None:
    rows = [
        row(1, ts=10.0, latency_ms=100.0),
        row(
            2,
            ts=10.5,
            latency_ms=200.0,
            provider="sim-b",
            served_model="chat-b",
            is_fallback=True,
            role="provider_fallback",
            cost_usd=0.25,
            **OK,
        ),
    ]
    s = summarize("5-0", rows)
    assert (s.outcome, s.status, s.provider, s.served_model) == ("ok", 200, "sim-b", "chat-b")
    assert s.latency_ms == pytest.approx(700.0)
    assert s.cost_usd == 0.25
    assert s.providers == ("sim-a", "sim-b")


@pytest.mark.parametrize(
    ("filters", "shown"),
    [
        (Filters(), True),
        (Filters(org="beta"), False),
        (Filters(squad="research", key="ci-bot"), True),
        (Filters(model="chat"), True),
        (Filters(model="chat-b"), True),
        (Filters(model="other"), False),
        (Filters(provider="sim-a"), True),
        (Filters(provider="sim-c"), False),
        (Filters(outcome="ok"), True),
        (Filters(outcome="failed"), False),
        (Filters(since_s=1001.0), True),
        (Filters(since_s=1002.0), False),
        (Filters(until_s=1000.0), False),
    ],
    ids=lambda v: repr(v) if not isinstance(v, bool) else str(v),
)
def test_filters_match_requests(filters: Filters, shown: bool) -> None:
    rows = [row(2, provider="sim-b", served_model="chat-b", is_fallback=True, **OK), row(1)]
    assert filters.matches(rows) is shown


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("1700000000000-0", True),
        ("(1700000000000-12", True),
        ("+", False),
        ("1-0) or", False),
        (None, False),
        ("253402300799999-18446744073709551615", True),  # 9999-12-31, and 2^64-1: the largest accepted
        ("253402300800000-0", False),
        ("18446744073709551616-0", False),  # past 2^64 Redis answers an error, once shown as Redis unreachable
        ("(1-99999999999999999999", False),
        ("(0-0", False),  # nothing is before it: Redis refuses the interval
        ("0-0", True),
    ],
)
def test_cursor_accepts_only_stream_ids(value: str | None, valid: bool) -> None:
    assert (valid_cursor(value) is not None) is valid


def test_traffic_counts_calls_per_minute_and_error_classes_without_messages() -> None:
    rows = [row(1, message="Incorrect API key provided"), row(2, is_retry=True), row(3, provider="sim-b", **OK)]
    got = figures.traffic([msgspec.convert(r, figures.Row) for r in rows], window_s=120.0)
    assert got["sim-a/chat-a"].calls_per_min == 1.0
    assert got["sim-a/chat-a"].errors == (("retry_then_fallback 503", 2),)
    assert got["sim-b/chat-a"].errors == ()


def test_spend_sums_cost_per_scope_and_period() -> None:
    now = 1_000_000.0
    rows = [
        row(1, ts=now - 60, cost_usd=1.0, **OK),
        row(1, ts=now - 7200, cost_usd=2.0, key="other", **OK),
        row(1, ts=now - 200_000, cost_usd=4.0, squad=None, **OK),
        row(1, ts=now - 900_000, cost_usd=8.0, **OK),
    ]
    table = {r.scope: r for r in figures.spend([msgspec.convert(r, figures.Row) for r in rows], now)}
    assert table["acme"].usd == (1.0, 3.0, 7.0)
    assert table["acme / research / ci-bot"].usd == (1.0, 1.0, 1.0)
    assert table["acme / research / other"].usd == (0.0, 2.0, 2.0)
    assert table["acme / -"].usd == (0.0, 0.0, 4.0)
    assert table["acme"].requests == 3


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([], ""),
        ([(0.0, 1.0)], "1.0,1.0 119.0,1.0"),
        ([(0.0, 1.0), (1.0, 0.0), (2.0, 0.5)], "1.0,1.0 60.0,23.0 119.0,12.0"),
        ([(0.0, 1.7), (1.0, -1.0)], "1.0,1.0 119.0,23.0"),
    ],
    ids=["empty", "one", "three", "clamped"],
)
def test_sparkline_points_scale_scores_to_the_box(points: list[tuple[float, float]], expected: str) -> None:
    assert samples.sparkline(points) == expected


def test_ledger_rows_list_the_org_then_squads_then_keys_for_day_and_month() -> None:
    day = {"org": "acme", "total_usd": 1.5, "squads": {"research": 1.5}, "keys": {"ci-bot": 1.5}}
    month = {"org": "acme", "total_usd": 4.0, "squads": {"research": 3.0, "ops": 1.0}, "keys": {"ci-bot": 4.0}}
    rows = [(r.level, r.scope, r.day_usd, r.month_usd) for r in figures.ledger_rows(day, month)]
    assert rows == [
        ("org", "acme", 1.5, 4.0),
        ("squad", "acme / squad ops", 0.0, 1.0),
        ("squad", "acme / squad research", 1.5, 3.0),
        ("key", "acme / key ci-bot", 1.5, 4.0),
    ]


def test_ledger_rows_carry_each_scopes_budget_and_the_share_used() -> None:
    from turnout.core.spend import Budget

    day = {"org": "acme", "total_usd": 1.0, "keys": {"ci-bot": 1.0}}
    month = {"org": "acme", "total_usd": 50.0, "keys": {"ci-bot": 20.0}}
    budgets = {
        ("org", ""): Budget(usd=100.0),
        ("key", "ci-bot"): Budget(usd=4.0, period="day", hard=True),
        ("squad", "quiet"): Budget(usd=10.0),
    }
    rows = {r.scope: r for r in figures.ledger_rows(day, month, budgets)}
    assert rows["acme"].used == 0.5
    assert rows["acme / key ci-bot"].used == 0.25 and rows["acme / key ci-bot"].budget.hard  # type: ignore[union-attr]
    assert rows["acme / squad quiet"].month_usd == 0.0 and rows["acme / squad quiet"].used == 0.0


@pytest.mark.parametrize(
    ("value", "minutes", "error"),
    [
        (None, 0, None),
        ("", 0, None),
        ("15", 15, None),
        ("43200", 43200, None),
        ("forever", 0, "`last` must be a whole number of minutes from 1 to 43200, not `forever`."),
        ("0", 0, "`last` must be a whole number of minutes from 1 to 43200, not `0`."),
        ("43201", 0, "`last` must be a whole number of minutes from 1 to 43200, not `43201`."),
        ("1.5", 0, "`last` must be a whole number of minutes from 1 to 43200, not `1.5`."),
    ],
)
def test_the_last_window_is_a_whole_number_of_minutes_else_the_page_says_so(
    value: str | None, minutes: int, error: str | None
) -> None:
    from turnout_ingress.ui.query import last_minutes

    assert last_minutes(value) == (minutes, error)


@pytest.mark.parametrize(
    ("value", "outcome", "error"),
    [
        (None, None, None),
        ("", None, None),
        ("ok", "ok", None),
        ("failed", "failed", None),
        ("bogus", None, "`outcome` must be ok or failed, not `bogus`."),
        ("OK", None, "`outcome` must be ok or failed, not `OK`."),
        ("in_flight", None, "`outcome` must be ok or failed, not `in_flight`."),
    ],
)
def test_the_outcome_filter_is_ok_or_failed_else_the_page_says_so(
    value: str | None, outcome: str | None, error: str | None
) -> None:
    from turnout_ingress.ui.query import outcome as outcome_filter

    assert outcome_filter(value) == (outcome, error)


def test_summary_lists_the_considered_offers_of_the_last_row_in_words() -> None:
    considered = [
        {"provider": "sim-b", "model": "b", "catalog_model": "chat", "reason": "circuit_open", "reopen_in_s": 12.5},
        {"provider": "sim-c", "model": "c", "catalog_model": "chat", "reason": "capped", "reopen_in_s": None},
        {"provider": "sim-d", "model": "d", "catalog_model": "chat", "reason": "something_new"},
    ]
    summary = summarize("1-0", [row(1, considered=[]), row(2, is_retry=True, considered=considered, **OK)])
    assert [(c.target, c.why, c.reopen_in_s) for c in summary.considered] == [
        ("sim-b/b", "circuit open", 12.5),
        ("sim-c/c", "past plan.max_offers", None),
        ("sim-d/d", "something_new", None),
    ]
    assert summarize("1-0", [row(1, **OK)]).considered == ()  # rows written before the field: none
