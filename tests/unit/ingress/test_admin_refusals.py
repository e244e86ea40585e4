"""`GET /admin/v1/refusals`: its query (a 400 `invalid_value` naming a bad parameter), its filters, and
the newest rows up to the limit."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest

from support.ingress_app import CONFIG
from turnout.config import parse_config
from turnout.errors import RequestRejected
from turnout.settings import Settings
from turnout_ingress.admin.refusals import DEFAULT_LIMIT, MAX_LIMIT, RefusalQuery, matches, newest, parse_query
from turnout_ingress.app import create_app
from turnout_ingress.guard.door import RefusalRow, refusal_row


def test_an_empty_query_reads_everything_up_to_the_default_limit() -> None:
    assert parse_query({}) == RefusalQuery(None, None, None, None, None, DEFAULT_LIMIT)


def test_every_filter_is_read() -> None:
    query = parse_query(
        {"since": "100", "until": "200", "route": "/v1/images", "status": "404", "code": "unknown_route", "limit": "5"}
    )
    assert query == RefusalQuery(100.0, 200.0, "/v1/images", 404, "unknown_route", 5)


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ({"route": "/v1/secret/path/123"}, "route"),
        ({"status": "200"}, "status"),
        ({"status": "4O4"}, "status"),
        ({"code": "Not A Code"}, "code"),
        ({"limit": "0"}, "limit"),
        ({"limit": str(MAX_LIMIT + 1)}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"since": "300", "until": "200"}, "since"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(query: dict[str, str], param: str) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_query(query)
    assert (info.value.status_code, info.value.code, info.value.param) == (400, "invalid_value", param)


def _row(i: int, status: int = 401, route: str = "other") -> RefusalRow:
    return refusal_row(float(i), f"r{i}", "POST", route, status, "invalid_api_key", None, None)


def test_a_row_matches_when_it_passes_every_filter() -> None:
    row = _row(150, 429, "/v1/embeddings")
    assert matches(row, parse_query({"since": "150", "until": "150", "route": "/v1/embeddings", "status": "429"}))
    assert not matches(row, parse_query({"since": "151"}))
    assert not matches(row, parse_query({"route": "/v1/chat/completions"}))
    assert not matches(row, parse_query({"code": "rate_limit_exceeded"}))


async def _stream(rows: list[bytes]) -> AsyncIterator[bytes]:
    for raw in rows:
        yield raw


async def test_the_newest_matching_rows_up_to_the_limit_and_whether_more_matched() -> None:
    raws = [msgspec.json.encode(_row(i, 404 if i % 2 else 401)) for i in range(10, 0, -1)] + [b"not json"]
    found, more = await newest(_stream(raws), parse_query({"status": "404", "limit": "3"}))
    assert ([r.request_id for r in found], more) == (["r9", "r7", "r5"], True)
    found, more = await newest(_stream(raws), parse_query({"status": "404", "limit": "5"}))
    assert ([r.request_id for r in found], more) == (["r9", "r7", "r5", "r3", "r1"], False)


async def test_redis_unreachable_is_a_503_with_retry_after() -> None:
    """The in-process app's Redis (port 9) never answers; the operator reads the callers not identified
    (no tenancy read first), so the stream's read is the one that fails."""
    app = create_app(
        parse_config(CONFIG, env={}),
        redis_url="redis://127.0.0.1:9",
        settings=Settings.from_env({"TURNOUT_OPERATOR_KEY": "op-test-refusals-0001"}),
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        answer = await client.get(
            "/admin/v1/refusals", params={"org": "-"}, headers={"authorization": "Bearer op-test-refusals-0001"}
        )
        assert (answer.status_code, answer.headers["retry-after"]) == (503, "1")
        assert answer.json()["error"]["code"] == "redis_unavailable"
        bad = await client.get(
            "/admin/v1/refusals",
            params={"org": "-", "limit": "0"},
            headers={"authorization": "Bearer op-test-refusals-0001"},
        )
        assert (bad.status_code, bad.json()["error"]["param"]) == (400, "limit")
