"""The ingress's HTTP guards (`turnout_ingress.guard.http`) on a real uvicorn server.

A tiny ASGI app served in-process on 127.0.0.1 by uvicorn with the guarded
protocol; raw sockets play the attackers. Deadlines are short (0.4 s) and
the assertions leave a wide margin (seconds), so a loaded machine does not
make them flaky.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import uvicorn

from turnout.config import GatewayConfig
from turnout_ingress.guard.http import GuardLimits, guarded_protocol

LIMITS = GuardLimits(max_header_bytes=8 * 1024, header_timeout_s=0.4, body_timeout_s=0.4, max_connections=5)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


async def refusing_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """`app`, but a request declaring a body over 100 bytes is answered 413 at once, its body unread
    (as the ingress refuses a declared `Content-Length` over `max_body_bytes`)."""
    if scope["type"] == "http" and int(dict(scope["headers"]).get(b"content-length", b"0")) > 100:
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"no"})
        return
    await app(scope, receive, send)


@contextlib.asynccontextmanager
async def serving(asgi: Any, limits: GuardLimits) -> AsyncIterator[int]:
    """`asgi` served by uvicorn with the guards of `limits` on a free port of 127.0.0.1, yielded."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = int(s.getsockname()[1])
    config = uvicorn.Config(
        asgi, host="127.0.0.1", port=free, http=guarded_protocol(limits), log_level="critical", lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield free
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async with serving(app, LIMITS) as free:
        yield free


@pytest.fixture
async def refusing_port() -> AsyncIterator[int]:
    """`refusing_app` with a body deadline far beyond any wait here: only the answer can close the connection."""
    async with serving(refusing_app, msgspec.structs.replace(LIMITS, body_timeout_s=600)) as free:
        yield free


async def exchange(port: int, data: bytes, *, then_wait_s: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(4096), then_wait_s)
    except ConnectionError:
        return b"reset"
    finally:
        writer.close()


async def test_http_guard_serves_an_ordinary_request(port: int) -> None:
    answer = await exchange(port, b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi")
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"hi")


async def test_http_guard_headers_over_the_limit_get_431(port: int) -> None:
    whole = await exchange(port, b"GET / HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 20_000 + b"\r\n\r\n")
    assert whole.startswith(b"HTTP/1.1 431") and b"8192 bytes" in whole
    assert re.search(rb"\r\nx-request-id: [0-9a-f]{32}\r\n", whole), whole[:300]
    unfinished = await exchange(port, b"GET / HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 20_000)
    assert unfinished.startswith(b"HTTP/1.1 431")


async def test_http_guard_a_long_url_gets_414_not_431(port: int) -> None:
    long_target = b"/v1/chat/completions?q=" + b"a" * 20_000
    for request in (
        b"GET " + long_target + b" HTTP/1.1\r\nhost: x\r\n\r\n",  # the whole head at once
        b"GET " + long_target,  # the request line not even finished
    ):
        answer = await exchange(port, request)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 414 URI Too Long"), answer[:200]
        assert b"connection: close" in head and re.search(rb"\r\nx-request-id: [0-9a-f]{32}", head)
        error = json.loads(body)["error"]
        assert (error["code"], error["type"]) == ("uri_too_long", "invalid_request_error")
        assert "URL is too long" in error["message"] and "8192 bytes" in error["message"]


async def test_http_guard_a_url_sent_in_pieces_is_still_named_as_the_long_part(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /?q=")
        for _ in range(4):  # 8 KB of target in pieces, each read checked on its own: 8,200 bytes in all
            writer.write(b"a" * 2048)
            await writer.drain()
            await asyncio.sleep(0.02)
        answer = await asyncio.wait_for(reader.read(4096), 5)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 414"), answer[:200]


async def test_http_guard_many_headers_after_a_fair_url_get_431(port: int) -> None:
    # a 3 KB URL is the smaller part of a 12 KB head: the headers are what is too large
    answer = await exchange(
        port, b"GET /?q=" + b"a" * 3000 + b" HTTP/1.1\r\nhost: x\r\n" + b"x-pad: " + b"b" * 9000 + b"\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["code"] == "headers_too_large"


async def test_http_guard_a_long_url_on_the_anthropic_surface_gets_anthropics_error_shape(port: int) -> None:
    answer = await exchange(port, b"POST /v1/messages?q=" + b"a" * 20_000 + b" HTTP/1.1\r\nhost: x\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414"), answer[:200]
    document = json.loads(body)
    assert document["type"] == "error" and document["error"]["type"] == "invalid_request_error"
    assert "URL is too long" in document["error"]["message"]


async def test_http_guard_bytes_that_are_not_http_get_a_json_400_with_a_request_id(port: int) -> None:
    for garbage in (b"HELLO THERE\r\n\r\n", b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: nope\r\n\r\n"):
        answer = await exchange(port, garbage)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 Bad Request"), answer[:200]
        assert b"content-type: application/json" in head and b"connection: close" in head
        assert re.search(rb"\r\nx-request-id: [0-9a-f]{32}(\r\n|$)", head), head
        error = json.loads(body)["error"]
        assert (error["code"], error["type"]) == ("invalid_http", "invalid_request_error")
        assert "not valid HTTP/1.1" in error["message"]


async def test_http_guard_keep_alive_serves_several_requests_each_under_the_limit(port: int) -> None:
    one = b"POST / HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 5_000 + b"\r\ncontent-length: 2\r\n\r\nok"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = b""
    for _ in range(3):
        writer.write(one)
        await writer.drain()
        answers += await asyncio.wait_for(reader.read(4096), 5)
    writer.close()
    assert answers.count(b"HTTP/1.1 200") == 3


async def test_http_guard_slow_loris_gets_408_at_the_header_deadline(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n")
    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = b""
    for i in range(40):  # a header line every 0.1 s: never idle, never finished
        with contextlib.suppress(ConnectionError):
            writer.write(b"x-%d: y\r\n" % i)
        with contextlib.suppress(TimeoutError):
            answer = await asyncio.wait_for(reader.read(4096), 0.1)
        if answer:
            break
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408")
    assert loop.time() - started < 3.0


async def test_http_guard_connection_sending_nothing_is_closed(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await asyncio.wait_for(reader.read(4096), 5)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408")


async def test_http_guard_slow_body_gets_408_at_the_body_deadline(port: int) -> None:
    answer = await exchange(port, b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nabc")
    assert answer.startswith(b"HTTP/1.1 408")


async def test_http_guard_a_slow_body_on_the_anthropic_surface_gets_anthropics_error_shape(port: int) -> None:
    answer = await exchange(port, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nabc")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"x-request-id: " in head
    error = json.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "timeout_error"
    assert "body did not arrive" in error["error"]["message"]


async def _one_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """The head and content of one answer with a `content-length`, read off `reader` (5 s at most)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = re.search(rb"\r\ncontent-length: (\d+)", head, re.IGNORECASE)
    assert length is not None, head
    return head, await asyncio.wait_for(reader.readexactly(int(length[1])), 5)


async def test_http_guard_an_answer_before_the_body_arrived_closes_the_connection(refusing_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", refusing_port)
    try:
        writer.write(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5000000000\r\n\r\n{}")
        head, _ = await _one_answer(reader)
        assert head.startswith(b"HTTP/1.1 413") and b"\r\nconnection: close" in head, head
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")  # not taken for the rest of the body
        with contextlib.suppress(ConnectionError):
            assert await asyncio.wait_for(reader.read(4096), 5) == b""  # closed: no answer, no wait
    finally:
        writer.close()


async def test_http_guard_a_body_all_arrived_keeps_the_connection_read_or_not(refusing_port: int) -> None:
    unread = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 200\r\n\r\n" + b"a" * 200
    read = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi"
    reader, writer = await asyncio.open_connection("127.0.0.1", refusing_port)
    try:
        heads = []
        for request in (unread, read, unread):
            writer.write(request)
            heads.append((await _one_answer(reader))[0])
    finally:
        writer.close()
    assert [h[:12] for h in heads] == [b"HTTP/1.1 413", b"HTTP/1.1 200", b"HTTP/1.1 413"]
    assert not any(b"connection: close" in h for h in heads), heads


async def test_http_guard_connections_beyond_the_cap_get_503(port: int) -> None:
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMITS.max_connections)]
    try:
        answer = await exchange(port, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503") and b"\r\nretry-after: 1" in head, head
        error = json.loads(body)["error"]
        assert (error["code"], error["type"]) == ("too_many_connections", "service_unavailable")
    finally:
        for _, writer in held:
            writer.close()


def test_http_guard_limits_come_from_the_gateway_settings() -> None:
    limits = GuardLimits.of(GatewayConfig())
    assert (limits.max_header_bytes, limits.header_timeout_s, limits.body_timeout_s, limits.max_connections) == (
        65536,
        10.0,
        30.0,
        10_000,
    )
