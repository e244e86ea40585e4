"""`POST /v1/embeddings`: the OpenAI Embeddings surface.

Owns: reading an embeddings body into the front door's `Inbound` (`parse_embeddings_request`;
the `provider` object taken out and checked as on the chat route) and answering in the
fleet's own shape, which is this surface's (OpenAI's `list` of `embedding` objects, or an
OpenAI error body). The request goes through the queue and the same attempt loop as chat;
only models of `type: embedding` serve it, and only by their own offers
(`turnout.core.model_types`). A batch is one request: it is never split across models.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.

Source: https://platform.openai.com/docs/api-reference/embeddings/create (`input` a string,
an array of strings, an array of token ids or an array of such arrays, at most 2048 items,
no empty string; `dimensions`; `encoding_format` `float` or `base64`; `user`).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from starlette.responses import Response

from turnout.core.native import CHAT
from turnout_ingress.serving.validation import decode_request, invalid, take_preferences
from turnout_ingress.surfaces.base import FleetShaped, Inbound
from turnout_ingress.surfaces.inputs import check_text_input

MAX_DIMENSIONS: Final = 65_536
"""Largest `dimensions` accepted (no embedding model has more; the provider checks its own)."""
ENCODINGS: Final = frozenset({"float", "base64"})
"""`encoding_format` values of the OpenAI reference."""
OPTIONAL: Final = ("dimensions", "encoding_format", "user")
"""Optional fields whose `null` the gateway takes as absent: left out of the request it sends."""

_encode = msgspec.json.Encoder()


def parse_embeddings_request(raw: bytes) -> dict[str, Any]:
    """Decode and check an embeddings body: the shared first checks (`decode_request`), then
    `input`, `dimensions` (an integer from 1 to `MAX_DIMENSIONS`), `encoding_format` (one of
    `ENCODINGS`), `user` (a string) and `stream` (absent or false: embeddings are never
    streamed). Other fields pass to the provider untouched.

    Raises:
        RequestRejected: 400 naming the field (`param`).
    """
    data = decode_request(raw)
    check_text_input(data.get("input"), "input", empty=False)
    dimensions = data.get("dimensions")
    if dimensions is not None and (
        isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= MAX_DIMENSIONS
    ):
        raise invalid(f"`dimensions` must be an integer from 1 to {MAX_DIMENSIONS}.", "dimensions")
    encoding = data.get("encoding_format")
    if encoding is not None and encoding not in ENCODINGS:
        raise invalid(f"`encoding_format` must be one of {', '.join(sorted(ENCODINGS))}.", "encoding_format")
    user = data.get("user")
    if user is not None and not isinstance(user, str):
        raise invalid("`user` must be a string.", "user")
    if data.get("stream") not in (None, False):
        raise invalid("Embeddings are not streamed; leave `stream` out.", "stream")
    return data


FLOAT_VECTOR: Final = b'"embedding":['
"""How a vector given as floats starts in a compact answer (`turnout.adapters.gemini_embeddings`'s)."""


def as_base64(body: bytes) -> bytes:
    """`body` (an embeddings list) with every vector given as floats encoded as OpenAI's `base64`
    encoding is: the little-endian float32 bytes, in base64; any other body as it is."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return body
    for item in items:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if isinstance(vector, list):
            item["embedding"] = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return _encode.encode(data)


class Embeddings(FleetShaped):
    """The `Surface` of OpenAI Embeddings (module doc); answers as they are (`FleetShaped`), but
    for the vectors a provider gave as floats to a client that asked `encoding_format: base64`."""

    name = "embeddings"
    path = "/v1/embeddings"

    def render(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        request_id: str,
        inbound: Inbound | None,
        shape: str = CHAT,
    ) -> Response:
        """The fleet's answer, its float vectors in base64 when the client asked so (a family that
        translates embeddings answers floats: `turnout.adapters.gemini_embeddings`); see `Surface.render`."""
        wanted = inbound is not None and inbound.body.get("encoding_format") == "base64"
        if status == 200 and wanted and FLOAT_VECTOR in body:
            body = as_base64(body)
        return super().render(status, body, headers, request_id, inbound, shape)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """The checked body; the job carries the client's bytes (the worker takes `provider` out
        again before any upstream call). See `Surface.parse`."""
        body = parse_embeddings_request(raw)
        preferences = take_preferences(body)
        nulls = [name for name in OPTIONAL if name in body and body[name] is None]
        if not nulls:
            return Inbound(body, preferences, raw, "embeddings")
        for name in nulls:  # null stands for "absent" (as on chat); a provider may refuse a null
            del body[name]
        return Inbound(body, preferences, _encode.encode(body), "embeddings")


EMBEDDINGS: Final = Embeddings()
"""The embeddings surface."""
