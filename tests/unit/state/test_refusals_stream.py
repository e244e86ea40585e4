"""The door refusals' streams and their writer, on a real redis-server: one stream per org and one for
callers not identified, each bounded; the writer's cap, drops and batches; an org's purge."""

from __future__ import annotations

import msgspec
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from support.clocks import FakeClock
from turnout.observability.metrics import Metrics
from turnout.state import keys, refusals_stream
from turnout.state.org_purge import purge_org_state
from turnout_ingress.guard.door import RateCap, RefusalRow, refusal_row
from turnout_ingress.guard.refusal_writer import RefusalWriter


def _row(org: str | None, i: int = 0, *, status: int = 401, route: str = "other") -> RefusalRow:
    return refusal_row(1000.0 + i, f"r{i}", "POST", route, status, "invalid_api_key", org, "k" if org else None)


async def _rows(redis: Redis, org: str | None, high: str = "+", low: str = "-", batch: int = 200) -> list[RefusalRow]:
    read = refusals_stream.newest_first(redis, org, high=high, low=low, batch=batch)
    return [msgspec.json.decode(raw, type=RefusalRow) async for raw in read]


def _dropped(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("turnout_refusal_rows_dropped_total", {"reason": reason}) or 0.0


async def test_rows_go_to_their_orgs_stream_and_the_unidentified_one_each_bounded(redis_client: Redis) -> None:
    rows = [(None, b"x")] * 3000 + [("acme", b'{"a":1}'), ("ac%me", b"y")]
    await refusals_stream.append(redis_client, rows, max_len=100)
    assert await redis_client.xlen(keys.refusals_key(None)) < 300  # `~`: whole nodes trimmed, about 100 kept
    assert await redis_client.xlen(keys.refusals_key("acme")) == 1
    assert keys.refusals_key("ac%me") == "turnout:refusals:org:ac%25me"  # percent-encoded: no id reaches another's
    assert await redis_client.xlen(keys.RECORDS_STREAM) == 0  # never the attempt records


async def test_newest_first_pages_and_keeps_to_the_bounds(redis_client: Redis) -> None:
    await refusals_stream.append(
        redis_client, [("acme", msgspec.json.encode(_row("acme", i))) for i in range(7)], max_len=100
    )
    assert [r.request_id for r in await _rows(redis_client, "acme")] == [f"r{i}" for i in range(6, -1, -1)]
    assert [r.request_id for r in await _rows(redis_client, "acme", batch=2)] == [f"r{i}" for i in range(6, -1, -1)]
    assert await _rows(redis_client, "acme", high="1", low="0") == []
    assert await _rows(redis_client, "beta") == []


def test_id_bounds_widen_a_time_range_by_the_slack() -> None:
    assert refusals_stream.id_bounds(None, None) == ("+", "-")
    high, low = refusals_stream.id_bounds(1000.0, 2000.0)
    assert (int(high), int(low)) == (int((2000 + refusals_stream.ID_SLACK_S) * 1000), 940_000)
    assert refusals_stream.id_bounds(1.0, None)[1] == "0"


async def test_the_writer_caps_unidentified_rows_and_never_an_orgs(redis_client: Redis) -> None:
    registry = (metrics := Metrics()).registry
    writer = RefusalWriter(
        redis_client, max_len=1000, dropped=metrics.refusal_rows_dropped, cap=RateCap(2, clock=FakeClock(0.0))
    )
    for i in range(50):
        writer.add(_row(None, i))
        writer.add(_row("acme", i, status=429))
    writer.add(_row(None, 99, route="/v1/images"))  # another (route, status, code): its own window
    assert await writer.flush() == 2 + 50 + 1
    assert len(await _rows(redis_client, None)) == 3
    assert len(await _rows(redis_client, "acme")) == 50
    assert _dropped(registry, "capped") == 48


async def test_a_full_buffer_drops_and_counts(redis_client: Redis) -> None:
    registry = (metrics := Metrics()).registry
    writer = RefusalWriter(redis_client, max_len=1000, dropped=metrics.refusal_rows_dropped, buffer_max=5)
    for i in range(8):
        writer.add(_row("acme", i))
    assert len(writer) == 5 and _dropped(registry, "buffer_full") == 3
    assert await writer.flush() == 5 and len(writer) == 0


async def test_redis_down_drops_the_batch_counts_it_and_holds_nothing() -> None:
    registry = (metrics := Metrics()).registry
    down = Redis(port=1, socket_connect_timeout=0.2)
    writer = RefusalWriter(down, max_len=10, dropped=metrics.refusal_rows_dropped, batch_max=4)
    for i in range(6):
        writer.add(_row("acme", i))
    assert await writer.flush() == 0
    assert _dropped(registry, "redis_unavailable") == 4 and len(writer) == 2
    await down.aclose()


async def test_the_background_flush_writes_and_stop_writes_the_rest(redis_client: Redis) -> None:
    writer = RefusalWriter(redis_client, max_len=100, dropped=Metrics().refusal_rows_dropped, flush_interval_s=3600)
    writer.start()
    writer.add(_row("acme", 1))
    await writer.stop()
    assert [r.request_id for r in await _rows(redis_client, "acme")] == ["r1"]


async def test_an_orgs_purge_takes_its_refusals_and_no_one_elses(redis_client: Redis) -> None:
    await refusals_stream.append(redis_client, [("acme", b"a"), ("acme2", b"b"), (None, b"c")], max_len=10)
    assert await purge_org_state(redis_client, "acme") == 1
    assert await redis_client.exists(keys.refusals_key("acme2"), keys.refusals_key(None)) == 2
