"""An SSE answer's events, read a network read at a time.

Owns: `event_batches`, which turns an open `text/event-stream` response into
lists of `ServerSentEvent`s: each list holds the events completed by one
read of the response body (all of them, in order), so that a consumer can
relay several events that arrived together in one write, and none waits for
a later read. An event split across reads is completed by the read that
brings its end; a partial event at the end of the body is dropped, as the
SSE rules say.
Must not import: the family modules, services, FastAPI, arq.

The line and field parsing is `turnout.adapters.sse_reader.EventReader`'s (the
WHATWG rules: lines end at CR LF, LF or CR, a CR LF cut between reads kept whole;
`event`, `data`, `id`, `retry` fields, comments); the events are httpx-sse's
public `ServerSentEvent`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.sse_reader import EventReader

_decode = msgspec.json.Decoder()

EventBatch = list[ServerSentEvent]
"""The events one read completed, in stream order; never empty when yielded."""


async def event_batches(response: httpx.Response) -> AsyncIterator[EventBatch]:
    """The events of an open SSE `response`, one list per read that completed any.

    Args:
        response: a streaming response whose body is `text/event-stream`
            (the caller checked the content type); its body is decoded as
            text (`Response.aiter_text`: content-encoding, then the charset,
            UTF-8 by default, a character split across reads kept whole).

    Yields:
        Non-empty lists of events, in stream order. Transport exceptions of
        the body read propagate; the events of earlier reads were yielded
        before them.
    """
    reader = EventReader()
    async for text in response.aiter_text():
        events = reader.feed(text)
        if events:
            yield events
    reader.close()  # an event not closed by a blank line is dropped


def object_data(event: ServerSentEvent) -> dict[str, Any] | None:
    """An event's data decoded when it is a JSON object, else None (not JSON, or another value)."""
    try:
        data = _decode.decode(event.data)
    except msgspec.DecodeError:
        return None
    return data if isinstance(data, dict) else None
