"""The dashboard's paged reads of the records stream, and its score samples, against a real Redis."""

from __future__ import annotations

from typing import Any

import msgspec
from redis.asyncio import Redis

from turnout.state import keys
from turnout_ingress.ui import reader, samples
from turnout_ingress.ui.activity import Filters

_encode = msgspec.json.Encoder()


def _row(rid: str, attempt: int, org: str = "acme", **fields: Any) -> dict[str, Any]:
    return {
        "ts": 1_700_000_000.0 + attempt,
        "request_id": rid,
        "org": org,
        "squad": None,
        "key": "k",
        "requested_model": "m",
        "served_model": "m",
        "provider": "p",
        "attempt": attempt,
        "status": 200,
        "class": "success",
        "kind": "success",
        "latency_ms": 1.0,
        "cost_usd": 0.0,
        **fields,
    }


async def _write(redis: Redis, rows: list[dict[str, Any]]) -> None:
    for r in rows:
        await redis.xadd(keys.RECORDS_STREAM, {"org": r["org"], "r": _encode.encode(r)})


def _interleaved(n: int) -> list[dict[str, Any]]:
    """`n` requests of 3 attempts each, written interleaved as concurrent requests are."""
    rows = []
    for attempt in (1, 2, 3):
        for i in range(n):
            rows.append(_row(f"r{i:03d}", attempt, org="acme" if i % 3 else "beta"))
    return rows


async def _all_pages(redis: Redis, size: int, **kwargs: Any) -> list[list[str]]:
    pages, cursor, skip = [], None, frozenset[str]()
    while True:
        page = await reader.read_page(
            redis, filters=kwargs.pop("filters", Filters()), cursor=cursor, skip=skip, size=size, **kwargs
        )
        pages.append([r.request_id for r in page.requests])
        for r in page.requests:
            assert len(r.attempts) == 3, r.request_id
        if page.cursor is None:
            return pages
        cursor, skip = page.cursor, frozenset(page.skip)


async def test_pages_show_every_request_once_with_all_its_attempts(redis_client: Redis) -> None:
    await _write(redis_client, _interleaved(10))
    pages = await _all_pages(redis_client, size=4, scope_org=None)
    flat = [rid for page in pages for rid in page]
    assert sorted(flat) == [f"r{i:03d}" for i in range(10)]
    assert len(flat) == len(set(flat))
    assert flat[:4] == ["r009", "r008", "r007", "r006"]  # newest row first


async def test_an_org_admin_reads_only_its_org(redis_client: Redis) -> None:
    await _write(redis_client, _interleaved(9))
    pages = await _all_pages(redis_client, size=2, scope_org="beta", filters=Filters(org="acme"))
    assert sorted(rid for page in pages for rid in page) == ["r000", "r003", "r006"]


async def test_a_filter_that_matches_nothing_stops_at_the_read_limit(redis_client: Redis) -> None:
    await _write(redis_client, _interleaved(40))
    page = await reader.read_page(redis_client, scope_org=None, filters=Filters(model="none"), size=5, scan_max=30)
    assert page.requests == () and page.truncated and page.cursor is not None
    rest = await _all_pages(redis_client, size=5, scope_org=None, filters=Filters(provider="p"))
    assert len({rid for p in rest for rid in p}) == 40


async def test_find_request_returns_its_attempts_and_hides_other_orgs(redis_client: Redis) -> None:
    await _write(redis_client, _interleaved(6))
    found = await reader.find_request(redis_client, "r001", scope_org="acme")
    assert found is not None and [a.number for a in found.attempts] == [1, 2, 3]
    assert await reader.find_request(redis_client, "r001", scope_org="beta") is None
    at = found.entry_id
    again = await reader.find_request(redis_client, "r001", scope_org=None, at=at)
    assert again is not None and again.entry_id == at


async def test_score_samples_are_kept_once_per_interval_newest_last(redis_client: Redis) -> None:
    await samples.sample(redis_client, [("p/m", 1.0)], now_s=100.0)
    await samples.sample(redis_client, [("p/m", 0.2)], now_s=101.0)  # within the interval: not kept
    await redis_client.delete(keys.ui_score_tick_key("p/m"))
    await samples.sample(redis_client, [("p/m", 0.5)], now_s=111.0)
    assert (await samples.read(redis_client, ["p/m", "q/m"])) == {"p/m": [(100.0, 1.0), (111.0, 0.5)], "q/m": []}


async def test_a_rerun_request_shows_one_row_per_attempt_with_the_dead_runs_attempt_lost(redis_client: Redis) -> None:
    await redis_client.delete(keys.RECORDS_STREAM)
    t0 = 1_700_000_000.0
    dead: dict[str, Any] = {"attempt_id": "a1", "run": 1, "is_rerun": False, "lost": False, "deadline_ts": t0 + 20}
    again: dict[str, Any] = {"attempt_id": "b1", "run": 2, "is_rerun": True, "lost": False, "deadline_ts": t0 + 40}
    started: dict[str, Any] = {
        "phase": "started",
        "kind": "in_flight",
        "class": None,
        "status": None,
        "latency_ms": None,
        "cost_usd": None,
    }
    await _write(
        redis_client,
        [
            _row("job1", 1, **dead, **started),  # the killed run's attempt: never ended, not yet marked
            _row("job1", 1, **again, **started, ts=t0 + 15),
            _row("job1", 1, **again, phase="ended", ts=t0 + 15),
        ],
    )
    early = await reader.find_request(redis_client, "job1", scope_org=None, now_s=t0 + 16)
    assert early is not None and [(a.number, a.kind) for a in early.attempts] == [(1, "in_flight"), (1, "success")]
    assert early.attempts[0].klass == "in_flight" and early.attempts[0].status is None
    found = await reader.find_request(redis_client, "job1", scope_org=None, now_s=t0 + 60)
    assert found is not None and found.outcome == "ok"
    assert [(a.kind, a.flags) for a in found.attempts] == [("lost", ("lost",)), ("success", ("rerun",))]
    assert "Re-run" in found.badges and "Lost ×1" in found.badges
    page = await reader.read_page(redis_client, scope_org=None, filters=Filters(), size=5, now_s=t0 + 60)
    assert [(r.request_id, len(r.attempts)) for r in page.requests] == [("job1", 2)]
    rows, _ = await reader.window_rows(redis_client, scope_org=None, since_s=t0 - 1, scan_max=100)
    assert len(rows) == 1  # only ended (and lost) rows count in the figures


async def test_every_cursor_the_pages_accept_is_one_redis_accepts(redis_client: Redis) -> None:
    """A cursor past what Redis takes was answered 503 "records store unreachable" with Redis fine."""
    from turnout_ingress.ui.activity import valid_cursor

    await _write(redis_client, _interleaved(3))
    for sent in ("253402300799999-18446744073709551615", "(253402300799999-18446744073709551615", "0-0", "(0-1"):
        cursor = valid_cursor(sent)
        assert cursor == sent
        await reader.read_page(redis_client, scope_org=None, filters=Filters(), cursor=cursor, size=5)
        await reader.find_request(redis_client, "r001", scope_org=None, at=cursor)
