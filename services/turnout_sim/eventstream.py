"""The `application/vnd.amazon.eventstream` framing, written by the simulator (pure).

Owns: `encode`, one message of the binary framing AWS streams answers in (ConverseStream):
a 12-byte prelude (total length, headers length, the prelude's CRC32), the headers, the
payload and the message's CRC32. botocore has a parser but no public encoder, so the
simulator writes the frames itself; the tests read them with botocore (and boto3).
Must not import: aiohttp or any I/O.

Format: https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html and
https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html (header value
type 7 = string: a 2-byte length, then UTF-8 bytes; all integers big-endian).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

STRING_TYPE = 7
"""The header value type of a string."""
MEDIA_TYPE = "application/vnd.amazon.eventstream"
"""The `Content-Type` of an event-stream answer."""


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", STRING_TYPE, len(raw_value)) + raw_value
    return bytes(out)


def encode(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string `headers` and `payload`."""
    head = _headers(headers)
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(event_type: str, data: dict[str, Any]) -> bytes:
    """An `event` message (`:event-type` `event_type`, JSON payload `data`)."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode(headers, json.dumps(data, separators=(",", ":")).encode())


def exception(exception_type: str, message: str) -> bytes:
    """An `exception` message (`:exception-type` `exception_type`, payload `{"message"}`),
    as AWS ends a stream that failed after its head (`throttlingException`, ...)."""
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return encode(headers, json.dumps({"message": message}).encode())


def corrupted(frame: bytes) -> bytes:
    """`frame` with its last byte flipped: its message CRC32 no longer matches (`badchunk`)."""
    return frame[:-1] + bytes([frame[-1] ^ 0xFF])
