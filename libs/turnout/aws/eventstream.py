"""The messages of an `application/vnd.amazon.eventstream` body, read with botocore's parser.

Owns: `messages`, which feeds a body's bytes to `botocore.eventstream.EventStreamBuffer` (the
prelude, header and message CRC32s checked; a broken frame raises botocore's `ParserError`)
and gives each read's complete messages as (headers, payload) pairs. botocore is imported
when a body is read (a `bedrock` stream's only).
Must not import: `turnout.adapters`, services, FastAPI, arq, httpx.

Framing: https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html
(total length, headers length, prelude CRC, headers, payload, message CRC).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

Message = tuple[dict[str, Any], bytes]
"""One message's headers (`:message-type`, `:event-type`, ... -> str) and payload bytes."""


def _parts(response: dict[str, Any]) -> Message:
    """(headers, payload) of a message's `to_response_dict()` (`headers`, `body`)."""
    return dict(response["headers"]), bytes(response["body"])


async def messages(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[Message]]:
    """The complete messages of a body, one non-empty list per read that completed any.

    Args:
        chunks: the body's bytes as read.

    Yields:
        (headers, payload) pairs in stream order. botocore's `ParserError` (a bad CRC, an
        impossible length) propagates once the messages before the broken one are given, as
        do `chunks`' exceptions; a partial message at the end of the body is dropped.
    """
    from botocore.eventstream import EventStreamBuffer, ParserError  # module doc: only when a body is read

    buffer = EventStreamBuffer()
    async for chunk in chunks:
        buffer.add_data(chunk)
        batch: list[Message] = []
        try:
            for message in buffer:
                batch.append(_parts(message.to_response_dict()))
        except ParserError:
            if batch:  # the read's messages before the broken one are given first
                yield batch
            raise
        if batch:
            yield batch
