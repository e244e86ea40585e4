"""`hiredis_packing`: the same bytes and the same errors as redis-py's Python packer, and real
commands, pipelines and scripts through a `BufferCheckedPool` (real redis-server)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from turnout.state.packing import hiredis_packing
from turnout.state.pool import BufferCheckedPool

_PACKING = hiredis_packing(Connection)

_argument = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=10).map(lambda raw: memoryview(raw)),
)


def _python(*args: Any) -> bytes:
    return b"".join(Connection().pack_command(*args))


def _hiredis(*args: Any) -> bytes:
    chunks = _PACKING().pack_command(*args)
    assert len(chunks) == 1  # one chunk: no joins
    return chunks[0]


@given(st.sampled_from(["SET", b"GET", "EVALSHA", "CONFIG GET", b"CLIENT SETNAME"]), st.lists(_argument, max_size=8))
def test_the_bytes_are_the_python_packers(name: str | bytes, args: list[Any]) -> None:
    assert _hiredis(name, *args) == _python(name, *args)


@pytest.mark.parametrize("bad", [None, True, bytearray(b"x"), object(), [1]])
def test_an_argument_redis_cannot_take_raises_the_python_packers_error(bad: object) -> None:
    with pytest.raises(DataError) as python:
        _python("SET", "k", bad)
    with pytest.raises(DataError) as packed:
        _hiredis("SET", "k", bad)
    assert str(packed.value) == str(python.value)
    assert type(bad).__name__ in str(packed.value)


def test_an_encoder_other_than_strict_utf8_keeps_the_python_packer() -> None:
    latin = _PACKING(encoding="latin-1")
    assert latin.pack_command("SET", "k", "é") == Connection(encoding="latin-1").pack_command("SET", "k", "é")
    assert b"".join(latin.pack_command("SET", "k", "é")).endswith(b"$1\r\n\xe9\r\n")
    lenient = _PACKING(encoding_errors="replace")
    assert lenient.pack_command("SET", "k", "\udc80") == Connection(encoding_errors="replace").pack_command(
        "SET", "k", "\udc80"
    )


def test_each_connection_class_gets_one_packing_subclass() -> None:
    for cls in (Connection, SSLConnection, UnixDomainSocketConnection):
        made = hiredis_packing(cls)
        assert issubclass(made, cls) and made is not cls
        assert hiredis_packing(cls) is made
        assert hiredis_packing(made) is made


def test_the_pool_makes_packing_connections_of_the_urls_class() -> None:
    assert BufferCheckedPool.from_url("redis://127.0.0.1:6379/0").connection_class is hiredis_packing(Connection)
    assert BufferCheckedPool.from_url("rediss://127.0.0.1:6379/0").connection_class is hiredis_packing(SSLConnection)
    assert BufferCheckedPool.from_url("unix:///tmp/redis.sock").connection_class is hiredis_packing(
        UnixDomainSocketConnection
    )


async def test_commands_pipelines_and_scripts_run_on_packing_connections(pooled_client: Redis) -> None:
    client = pooled_client
    value = "é" * 3 + "\x00"
    assert await client.set("packing:k", value)
    assert await client.get("packing:k") == value.encode()
    assert await client.config_get("maxmemory")  # a command name of two words
    async with client.pipeline(transaction=True) as pipe:
        pipe.incrbyfloat("packing:f", 1.5)
        pipe.incr("packing:n", 2**40)
        pipe.get("packing:k")
        assert await pipe.execute() == [1.5, 2**40, value.encode()]
    script = client.register_script("return {KEYS[1], ARGV[1], ARGV[2]}")
    assert await script(keys=["packing:s"], args=[b"\xff\x00", 7]) == [b"packing:s", b"\xff\x00", b"7"]
    with pytest.raises(DataError, match="NoneType"):
        await client.set("packing:none", None)  # type: ignore[arg-type]
    assert await client.echo("after") == b"after"  # the refused command left the connection usable
