"""The stream's ASGI response: the body sent, a client that leaves stops it, an error propagates (ASGI spec 2.3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from starlette.responses import StreamingResponse
from starlette.types import Message

from turnout_ingress.serving.streaming import EventStreamResponse

# every behaviour is Starlette's own: each test runs on both
RESPONSES = pytest.mark.parametrize("response_class", [StreamingResponse, EventStreamResponse])

SCOPE: Any = {"type": "http", "asgi": {"spec_version": "2.3"}}


class Client:
    """An ASGI server's side of one response: records what is sent; `leave()` disconnects."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._gone = asyncio.Event()

    def leave(self) -> None:
        self._gone.set()

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self._gone.set()  # as uvicorn: once the response is complete, receive answers http.disconnect

    async def receive(self) -> Message:
        await self._gone.wait()
        return {"type": "http.disconnect"}

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


@RESPONSES
async def test_the_body_is_sent_then_the_end_and_no_task_is_left(response_class: type[StreamingResponse]) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        yield b"data: 2\n\n"

    client = Client()
    before = asyncio.all_tasks()
    await response_class(body(), media_type="text/event-stream")(SCOPE, client.receive, client.send)
    assert client.sent[0]["type"] == "http.response.start"
    assert client.bodies() == [b"data: 1\n\n", b"data: 2\n\n", b""]
    assert client.sent[-1]["more_body"] is False
    await asyncio.sleep(0)  # the listener's cancellation is processed
    assert {t for t in asyncio.all_tasks() - before if not t.done()} == set()


@RESPONSES
async def test_a_client_that_leaves_cancels_the_body_which_cleans_up_and_the_response_returns(
    response_class: type[StreamingResponse],
) -> None:
    client = Client()
    waiting = asyncio.Event()
    ended: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"data: 1\n\n"
            waiting.set()
            await asyncio.Event().wait()  # an upstream that never sends again
            yield b"never"
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        finally:
            with anyio.CancelScope(shield=True):  # as the relay's cleanup (closing upstream, recording the attempt)
                await asyncio.sleep(0)
                ended.append("cleaned up")

    response = asyncio.ensure_future(
        response_class(body(), media_type="text/event-stream")(SCOPE, client.receive, client.send)
    )
    async with asyncio.timeout(10):  # a bound on the wait, not a timing assertion
        await waiting.wait()
        client.leave()
        await response  # returns normally: the client left
    assert ended == ["cancelled", "cleaned up"]
    assert client.bodies() == [b"data: 1\n\n"]


@RESPONSES
async def test_an_error_of_the_body_propagates(response_class: type[StreamingResponse]) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        raise RuntimeError("relay bug")

    client = Client()
    with pytest.raises(RuntimeError, match="relay bug"):
        await response_class(body(), media_type="text/event-stream")(SCOPE, client.receive, client.send)
