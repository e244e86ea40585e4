"""`POST /v1/messages`: the Anthropic Messages surface, for clients of the official `anthropic`
SDK (`base_url` pointed at Turnout, the gateway key as `x-api-key`).

Owns: reading a Messages body into the front door's `Inbound` (the Messages checks of
`wire`, translated into the internal OpenAI chat request; the `provider` object,
per-request routing preferences of SPEC §10, read as on the chat route, never sent
upstream; and the client's own request, carried for "same family, same bytes":
`native`) and answering in Anthropic's shape: a native answer (an Anthropic
target's `message` or stream events) as is; the worker's OpenAI `chat.completion` becomes
an Anthropic `message`, an OpenAI error body an Anthropic error body (502 → `api_error`,
503 → `overloaded_error`, 504 → `timeout_error`, the per-attempt summary kept), and the
direct path's OpenAI frames Anthropic events (`events`). The
`x-turnout-*` headers are the same as on the chat route. The rest of the Anthropic surface
(count_tokens, the Anthropic models list, errors on other paths) is in `routes`.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from typing import Any, Final

import msgspec
from starlette.responses import Response

from turnout.core.native import CHAT
from turnout_ingress.surfaces.base import Inbound, Stateless
from turnout_ingress.surfaces.messages.events import anthropic_stream
from turnout_ingress.surfaces.messages.native import carried, rendered

_encode = msgspec.json.Encoder()


class Messages(Stateless):
    """The `Surface` of the Anthropic Messages API (module doc)."""

    name = "messages"
    path = "/v1/messages"

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """`native.carried`: the internal OpenAI request, the preferences and the
        client's own request (the `Native` carry, with its `anthropic-version` and
        `anthropic-beta` headers) that an Anthropic target is sent as is; a stream asks its
        upstream for usage (the `message_delta` event carries it). See `Surface.parse`."""
        body, preferences, native = carried(raw, headers.items())
        if body.get("stream"):
            body["stream_options"] = {"include_usage": True}
        return Inbound(body, preferences, _encode.encode(body), native=native)

    def render(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        request_id: str,
        inbound: Inbound | None,
        shape: str = CHAT,
    ) -> Response:
        """`native.rendered`: a native `messages` body as is, a `chat` one translated
        into an Anthropic `message`, an error into Anthropic's error body. See `Surface.render`."""
        return rendered(status, body, headers, request_id, shape=shape)

    def render_stream(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """Anthropic events (`events.anthropic_stream`). See `Surface.render_stream`."""
        return anthropic_stream(frames, model=inbound.model)


MESSAGES: Final = Messages()
"""The Anthropic Messages surface."""
