"""SSE events read a network read at a time (`turnout.adapters.sse.event_batches`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from turnout.adapters.sse import event_batches


class Reads(httpx.AsyncByteStream):
    """A response body arriving in the given reads, in order."""

    def __init__(self, *reads: bytes) -> None:
        self._reads = reads

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in self._reads:
            yield read


async def _batches(*reads: bytes) -> list[list[tuple[str, str]]]:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Reads(*reads))
    return [[(e.event, e.data) for e in batch] async for batch in event_batches(response)]


async def test_the_events_of_one_read_come_as_one_batch_in_order() -> None:
    batches = await _batches(b"data: 1\n\ndata: 2\n\nevent: error\ndata: 3\n\n")
    assert batches == [[("message", "1"), ("message", "2"), ("error", "3")]]


async def test_an_event_split_across_reads_comes_with_the_read_that_completes_it() -> None:
    batches = await _batches(b'data: 1\n\ndata: {"a"', b": 2}\n", b"\ndata: 3\n\n")
    assert batches == [[("message", "1")], [("message", '{"a": 2}'), ("message", "3")]]


async def test_a_read_completing_no_event_gives_no_batch() -> None:
    batches = await _batches(b": keep-alive\n\n", b"data: 1", b"\n\n")
    assert batches == [[("message", "1")]]


async def test_line_ends_cr_lf_and_cr_are_lines_also_when_split_across_reads() -> None:
    # a CR LF split across reads is one line end: the two data lines make one event
    assert await _batches(b"data: 1\r", b"\ndata: 2\r\n\r\n") == [[("message", "1\n2")]]
    assert await _batches(b"data: 1\r\rdata: a\ndata: b\n\n") == [[("message", "1"), ("message", "a\nb")]]


async def test_a_character_split_across_reads_is_kept_whole() -> None:
    text = "data: h\u00e9llo \u2603\n\n".encode()
    cut = text.index("\u2603".encode()) + 1
    assert await _batches(text[:cut], text[cut:]) == [[("message", "h\u00e9llo \u2603")]]


async def test_a_partial_event_at_the_end_of_the_body_is_dropped() -> None:
    assert await _batches(b"data: 1\n\ndata: 2\n") == [[("message", "1")]]
