"""The dashboard's at-a-glance parts: aggregation, breaker timeline, SVG builders, client answer."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from turnout.core.breaker import BreakerSnapshot
from turnout.observability.breaker_log import transition_events
from turnout_ingress.ui import charts, glance, series, timeline
from turnout_ingress.ui.client_view import client_answer
from turnout_ingress.ui.figures import Row

SVG = "{http://www.w3.org/2000/svg}"
NOW = 1_800_000_000.0


def row(rid: str, attempt: int, ts: float, kind: str = "success", **kw: object) -> Row:
    fields: dict[str, object] = {
        "request_id": rid,
        "attempt": attempt,
        "ts": ts,
        "kind": kind,
        "provider": "sim-a",
        "served_model": "m",
        "latency_ms": 100.0,
    }
    return Row(**(fields | kw))  # type: ignore[arg-type]


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    assert root.find(f"{SVG}title") is not None and root.find(f"{SVG}desc") is not None
    assert "<script" not in svg and "style=" not in svg
    return root


def test_requests_group_attempts_and_name_their_outcome() -> None:
    rows = [
        row("a", 1, NOW - 10),
        row("b", 1, NOW - 9, "server_error", status=503),
        row("b", 2, NOW - 8, provider="sim-b", is_fallback=True, ttft_ms=40.0),
        row("c", 1, NOW - 5, "server_error"),
    ]
    reqs = {q.start_s: q for q in series.requests(rows)}
    assert [reqs[NOW - 10].outcome, reqs[NOW - 9].outcome, reqs[NOW - 5].outcome] == ["ok", "recovered", "failed"]
    b = reqs[NOW - 9]
    assert b.fallback and b.ttft_ms == 40.0 and round(b.latency_ms) == 1100


def test_glance_figures_over_the_live_span() -> None:
    rows = [row(f"r{i}", 1, NOW - 60 + i, "success" if i % 4 else "server_error") for i in range(40)]
    g = series.glance(series.requests(rows), NOW, 300.0)
    assert g.requests == 40 and g.error_pct == 25.0
    assert round(g.per_s, 3) == round(40 / 300, 3)
    assert round(g.p50_ms or 0) == 100 and g.ttft_p50_ms is None and g.fallbacks_per_min == 0


@given(st.lists(st.floats(0, 1e6), min_size=1), st.floats(1, 100))
def test_percentile_is_one_of_the_values_and_grows_with_p(values: list[float], p: float) -> None:
    got = series.percentile(values, p)
    assert got in values
    assert got is not None and got <= (series.percentile(values, 100) or 0)
    assert series.percentile(values, p / 2) is not None and (series.percentile(values, p / 2) or 0) <= got


@given(st.lists(st.tuples(st.floats(0, 3599), st.sampled_from(["success", "server_error"])), max_size=60))
def test_buckets_count_every_request_of_the_window_once_and_shares_sum_to_one(
    items: list[tuple[float, str]],
) -> None:
    rows = [row(f"r{i}", 1, NOW - 3600 + age, kind) for i, (age, kind) in enumerate(items)]
    b = series.buckets(rows, NOW, 3600.0)
    assert sum(sum(v) for v in b.outcomes.values()) == len(rows)
    for i, n in enumerate(b.attempts):
        total = sum(s[i] for s in b.share.values())
        assert (abs(total - 1.0) < 1e-9) if n else total == 0


def test_moved_to_names_where_a_failing_targets_traffic_went() -> None:
    rows = [
        row("x", 1, NOW - 5, "server_error"),
        row("x", 2, NOW - 4, provider="sim-b"),
        row("y", 1, NOW - 3, "server_error"),
        row("y", 2, NOW - 2, provider="sim-b"),
    ]
    assert series.moved(rows) == {"sim-a/m": [("sim-b/m", 2)]}


def test_window_names_fall_back_to_the_default() -> None:
    assert series.window_s("15m") == ("15m", 900.0)
    assert series.window_s("forever") == ("15m", 900.0)


def test_breaker_steps_become_events() -> None:
    closed = BreakerSnapshot()
    opened = BreakerSnapshot(
        open=True, trips=1, opened_at_s=NOW, cooldown_s=5, trip_rule="consecutive", last_error="503: down"
    )
    again = BreakerSnapshot(open=True, trips=2, opened_at_s=NOW + 6, cooldown_s=10)
    healed = BreakerSnapshot(closed_at_s=NOW + 20)
    resting = BreakerSnapshot(not_before_s=NOW + 30)
    assert [e["event"] for e in transition_events("p/m", closed, opened, NOW)] == ["opened"]
    assert transition_events("p/m", closed, opened, NOW)[0]["error"] == "503: down"
    assert [e["event"] for e in transition_events("p/m", opened, again, NOW + 6)] == ["reopened"]
    assert [e["event"] for e in transition_events("p/m", again, healed, NOW + 20)] == ["closed"]
    assert transition_events("p/m", closed, resting, NOW + 25) == [
        {"ts": NOW + 25, "target": "p/m", "event": "resting", "until": NOW + 30}
    ]
    assert transition_events("p/m", closed, BreakerSnapshot(run=2, failures=2.0), NOW) == []


def outage() -> list[timeline.Event]:
    return [
        timeline.Event(ts=NOW - 600, target="p/m", event="opened", cooldown_s=60, trips=1, rule="consecutive"),
        timeline.Event(ts=NOW - 530, target="p/m", event="reopened", cooldown_s=120, trips=2),
        timeline.Event(ts=NOW - 300, target="p/m", event="closed"),
        timeline.Event(ts=NOW - 200, target="p/m", event="resting", until=NOW - 170),
    ]


def test_timeline_states_over_an_outage() -> None:
    events = outage()
    assert [timeline.state_at(events, NOW - d) for d in (700, 590, 535, 500, 350, 250, 190, 100)] == [
        "closed",
        "open",
        "half_open",
        "open",
        "half_open",
        "closed",
        "resting",
        "closed",
    ]


@given(st.floats(60, 86_400), st.integers(1, 400))
def test_segments_cover_the_window_in_order(span: float, samples: int) -> None:
    segs = timeline.segments(outage(), NOW - span, NOW, samples)
    assert segs[0][0] == NOW - span and segs[-1][1] == NOW
    for (_, end, state), (start, _, nxt) in itertools.pairwise(segs):
        assert end == start and state != nxt
    assert all(s in timeline.STATES for _, _, s in segs)


def test_lane_draws_states_with_words_markers_and_the_share() -> None:
    events = outage()
    svg = charts.lane(
        "lane-0",
        "p/m <x>",
        NOW - 900,
        NOW,
        timeline.segments(events, NOW - 900, NOW),
        [1.0, 0.0, 0.5],
        events,
        "Its traffic went to q/m (3).",
    )
    root = parsed(svg)
    titles = [t.text or "" for t in root.iter(f"{SVG}title")]
    assert titles[0] == "p/m <x>"
    assert any(t.startswith("open (cooling down)") for t in titles)
    assert any("half-open" in t for t in titles) and any("resting" in t for t in titles)
    assert sum("probe failed" in t for t in titles) == 1 and sum("probe succeeded" in t for t in titles) == 1
    assert "Its traffic went to q/m (3)." in (root.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]
    assert len(root.findall(f".//{SVG}polyline")) == 1


def test_stacked_bars_and_lines_are_titled_images_with_legends() -> None:
    bars = parsed(charts.stacked_bars("c1", "Requests", NOW, 60, [("ok", [1, 2]), ("failed", [0, 3])]))
    assert [t.text for t in bars.iter(f"{SVG}text")][:3] == ["Requests", "ok", "failed"]
    assert len(bars.findall(f".//{SVG}rect")) == 2 + 3  # two legend squares, three non-empty bars
    lines = parsed(charts.lines("c2", "Latency", NOW, 60, [("p50", [10.0, None, 30.0]), ("p95", [None, None, None])]))
    legend = [t.text for t in lines.iter(f"{SVG}text")]
    assert "p50 30 ms" in legend and "p95 —" in legend
    assert len(lines.findall(f".//{SVG}circle")) == 2


def test_daily_bars_flag_a_day_over_budget() -> None:
    rows = [Row(ts=NOW - 86_400, cost_usd=2.0), Row(ts=NOW, cost_usd=0.5), Row(ts=NOW - 20 * 86_400, cost_usd=9.0)]
    days = glance.daily(rows, NOW)
    assert len(days) == 7 and [v for _, v in days][-2:] == [2.0, 0.5] and sum(v for _, v in days) == 2.5
    root = parsed(glance.daily_svg(days, 1.0))
    over = [g for g in root.iter(f"{SVG}g") if "over" in (g.get("class") or "")]
    assert len(over) == 1 and "(over budget)" in (over[0].find(f"{SVG}title").text or "")  # type: ignore[union-attr]


def test_the_client_answer_follows_what_the_client_was_told() -> None:
    ok = client_answer(
        [
            {
                "kind": "success",
                "status": 200,
                "provider": "p",
                "served_model": "m",
                "input_tokens": 5,
                "output_tokens": 7,
            }
        ]
    )
    assert (ok.status, ok.input_tokens, ok.output_tokens) == (200, 5, 7)
    failed = client_answer(
        [{"kind": "server_error", "class": "retry_then_fallback", "status": 500, "requested_model": "chat"}]
    )
    assert (failed.status, failed.code) == (502, "provider_failed") and "500" in failed.text
    limited = client_answer([{"kind": "rate_limited", "class": "retry_then_fallback", "status": 429}] * 2)
    assert limited.status == 429
    rejected = client_answer([{"kind": "client_error", "class": "terminal", "status": 404, "provider": "p"}])
    assert (rejected.status, rejected.code) == (404, "client_error")
    assert client_answer([{"kind": "auth", "class": "terminal", "status": None}]).status == 401
    assert client_answer([{"kind": "in_flight"}]).status is None
