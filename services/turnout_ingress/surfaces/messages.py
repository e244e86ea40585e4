"""`POST /v1/messages`: the Anthropic Messages surface, for clients of the official `anthropic`
SDK (`base_url` pointed at Turnout, the gateway key as `x-api-key`).

Owns: reading a Messages body into the front door's `Inbound` (the Messages checks of
`messages_wire`, translated into the internal OpenAI chat request; the `provider` object,
per-request routing preferences of SPEC §10, read as on the chat route, never sent
upstream) and answering in Anthropic's shape: the worker's OpenAI `chat.completion`
becomes an Anthropic `message`, an OpenAI error body an Anthropic error body (502 →
`api_error`, 503 → `overloaded_error`, 504 → `timeout_error`, the per-attempt summary
kept), and the direct path's OpenAI frames Anthropic events (`messages_events`). The
`x-turnout-*` headers are the same as on the chat route. The rest of the Anthropic surface
(count_tokens, the Anthropic models list, errors on other paths) is in `messages_routes`.
Must not import: `turnout_ingress.app`, `turnout_ingress.front_door`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from typing import Any, Final

import msgspec
from starlette.responses import Response

from turnout.adapters.anthropic_wire import WireError
from turnout.core.preferences import Preferences
from turnout.errors import RequestRejected
from turnout_ingress.errors import JSON
from turnout_ingress.messages_events import anthropic_stream
from turnout_ingress.messages_wire import (
    error_body,
    from_openai_error,
    parse_messages_request,
    to_anthropic_message,
    to_openai_request,
)
from turnout_ingress.surfaces.base import Inbound, Stateless
from turnout_ingress.validation import take_preferences

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
_DROPPED_HEADERS = frozenset({"content-length", "content-type"})


def openai_request_of(raw: bytes) -> tuple[dict[str, Any], Preferences]:
    """A `POST /v1/messages` body as the fleet serves it: the internal OpenAI chat request
    (`messages_wire.to_openai_request`, which never carries `provider`) and the request's
    routing preferences, its `provider` object (SPEC §10) taken out and checked as on the
    chat route (`take_preferences`); absent: no preferences.

    Raises:
        RequestRejected: 400 naming the field (`max_tokens`, `messages.0.content`,
            `provider.only[1]`): the Messages checks first, then the `provider` object.
    """
    try:
        checked = parse_messages_request(raw)
        body = to_openai_request(checked)
    except WireError as exc:
        raise RequestRejected(400, exc.message, param=exc.param) from exc
    return body, take_preferences(checked)


class Messages(Stateless):
    """The `Surface` of the Anthropic Messages API (module doc)."""

    name = "messages"
    path = "/v1/messages"

    def parse(self, raw: bytes) -> Inbound:
        """`openai_request_of`; a stream asks its upstream for usage (the `message_delta` event
        carries it). See `Surface.parse`."""
        body, preferences = openai_request_of(raw)
        if body.get("stream"):
            body["stream_options"] = {"include_usage": True}
        return Inbound(body, preferences, _encode.encode(body))

    def render(
        self, status: int, body: bytes, headers: Mapping[str, str], request_id: str, inbound: Inbound | None
    ) -> Response:
        """An Anthropic `message` for a 200, an Anthropic error body otherwise (a 200 whose body
        cannot be read: 502). See `Surface.render`."""
        kept = {k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS}
        if status == 200:
            try:
                completion = _decode.decode(body)
            except msgspec.DecodeError:
                failed = error_body(502, "The provider's answer could not be read.", request_id)
                return Response(failed, status_code=502, headers={**kept, "x-request-id": request_id}, media_type=JSON)
            return Response(
                _encode.encode(to_anthropic_message(completion)), status_code=200, headers=kept, media_type=JSON
            )
        return Response(from_openai_error(status, body, request_id), status_code=status, headers=kept, media_type=JSON)

    def render_stream(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """Anthropic events (`messages_events.anthropic_stream`). See `Surface.render_stream`."""
        return anthropic_stream(frames, model=inbound.model)


MESSAGES: Final = Messages()
"""The Anthropic Messages surface."""
