"""`BufferCheckedPool`: a clean pooled connection is handed out without the library's waiting check,
and every connection the library's check would have refused or replaced still is (real redis-server).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from arq.worker import func
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection, Connection

from turnout.config import parse_config
from turnout.settings import Settings
from turnout.state.pool import BufferCheckedPool, received_nothing
from turnout_ingress.app import create_app
from turnout_worker.pickup import PushWorker


def _count_library_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count calls of the library's check (`can_read_destructive`) on any connection."""
    calls = [0]
    original = AbstractConnection.can_read_destructive

    async def counted(self: AbstractConnection) -> Any:
        calls[0] += 1
        return await original(self)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(AbstractConnection, "can_read_destructive", counted)
    return calls


class _Reader:
    def has_data(self) -> bool:
        return False


async def _until(condition: Callable[[], bool]) -> None:
    """Yield to the event loop until `condition` holds (bounded, so a broken test fails, never hangs)."""
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.001)


@pytest.mark.parametrize(("pool_class", "checks"), [(BufferCheckedPool, 1), (ConnectionPool, 20)])
async def test_only_a_new_connection_goes_through_the_library_check(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, pool_class: type[ConnectionPool], checks: int
) -> None:
    calls = _count_library_checks(monkeypatch)
    client = Redis.from_pool(pool_class.from_url(redis_url))
    try:
        for n in range(20):
            assert await client.echo(str(n)) == str(n).encode()
    finally:
        await client.aclose()
    assert calls[0] == checks  # the library's pool (the control) checks every command


async def test_a_reply_nobody_read_is_never_taken_for_the_next_answer(pooled_client: Redis) -> None:
    client = pooled_client
    pool = client.connection_pool
    connection = await pool.get_connection("ECHO")  # type: ignore[no-untyped-call]
    await connection.send_command("ECHO", "stale")  # the reply is left unread
    await pool.release(connection)
    await _until(lambda: not received_nothing(connection))  # the stale reply has reached the stream
    assert await client.echo("fresh") == b"fresh"
    assert await client.echo("again") == b"again"


async def test_a_connection_the_server_closed_is_replaced_transparently(pooled_client: Redis, redis_url: str) -> None:
    client = pooled_client
    assert await client.ping()
    connection = client.connection_pool._available_connections[0]
    client_id = await client.client_id()
    async with Redis.from_url(redis_url) as admin:
        assert await admin.client_kill_filter(_id=client_id) == 1
    await _until(lambda: not received_nothing(connection))  # the end-of-file has reached the stream
    assert await client.ping()  # no ConnectionError: reconnected by the library's check
    assert await client.client_id() != client_id


async def test_a_connection_not_connected_or_with_an_unknown_parser_is_not_called_clean() -> None:
    assert not received_nothing(Connection())  # never connected
    stream = asyncio.StreamReader()
    other_parser = SimpleNamespace(_reader=stream, _writer=object(), _parser=SimpleNamespace(_reader=object()))
    assert not received_nothing(cast(AbstractConnection, other_parser))  # no hiredis `has_data`
    hiredis_like = SimpleNamespace(_reader=stream, _writer=object(), _parser=SimpleNamespace(_reader=_Reader()))
    assert received_nothing(cast(AbstractConnection, hiredis_like))  # the control: the same, with hiredis's shape


async def test_the_workers_pool_is_buffer_checked(redis_url: str) -> None:
    async def job(ctx: dict[str, Any]) -> None:
        return None

    worker = PushWorker(functions=[func(job, name="job")], redis_url=redis_url)
    pool = await worker.open_pool(redis_url)
    try:
        assert isinstance(pool.connection_pool, BufferCheckedPool)
        assert await pool.ping()
    finally:
        await pool.aclose()


def test_the_ingress_clients_are_buffer_checked() -> None:
    config = parse_config(
        'providers:\n  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}\n'
        "models:\n  m: {offers: [{provider: p, model: m}]}\n",
        env={},
    )
    app = create_app(config, redis_url="redis://127.0.0.1:9", settings=Settings.from_env({}))
    state = app.state.turnout
    assert isinstance(state.redis.connection_pool, BufferCheckedPool)
    assert isinstance(state.listen_redis.connection_pool, BufferCheckedPool)
    assert state.redis.connection_pool.connection_kwargs["socket_timeout"] == 0.5
    assert "socket_timeout" not in state.listen_redis.connection_pool.connection_kwargs  # pub/sub waits
