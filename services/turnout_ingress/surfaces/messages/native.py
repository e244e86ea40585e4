"""`POST /v1/messages` as the client sent it: the native carry in, the answer out by its shape.

Owns the two edges of "same family, same bytes" (SPEC §13) on the Messages surface:

- `carried`: a request's body read three ways — the internal OpenAI chat request
  the fleet plans, limits and (for OpenAI-family targets) sends; the routing
  preferences of its `provider` object; and the `Native` carry (the client's body
  and its `anthropic-version` / `anthropic-beta` headers) that an Anthropic target
  is sent as is. A body with no OpenAI translation (server tools, a `tool_result`
  with images, a document, an unknown block type) is not refused here: its carry
  says why (`Native.crossing`), so OpenAI-family targets are skipped as unable to
  express it and Anthropic ones serve it.
- `rendered`: a fleet answer for a Messages client by its shape — a native body
  (`messages`: the provider's `message`, unchanged) as is; a `chat` one (an OpenAI
  target served, or any error) translated (`wire`).

Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import msgspec
from starlette.responses import Response

from turnout.adapters.chat_parts import WireError
from turnout.core.native import MESSAGES, Native
from turnout.core.preferences import Preferences
from turnout.errors import RequestRejected
from turnout_ingress.errors import JSON
from turnout_ingress.serving.validation import provider_headers, take_preferences
from turnout_ingress.surfaces.messages.wire import (
    error_body,
    from_openai_error,
    parse_messages_request,
    to_anthropic_message,
    to_openai_request,
)

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
_DROPPED_HEADERS = frozenset({"content-length", "content-type"})


class Carried(NamedTuple):
    """A checked Messages request, as the fleet serves it.

    Attributes:
        body: the internal OpenAI chat request (never with `provider`); when the
            request has no translation, a stand-in with its `model`, `max_tokens`
            and `stream` and no messages (what planning and limits read), which no
            target is ever sent (`Native.crossing` skips OpenAI-family targets).
        preferences: the `provider` object's routing preferences (SPEC §10).
        native: the client's own request (`turnout.core.native.Native`).
    """

    body: dict[str, Any]
    preferences: Preferences
    native: Native


def _stand_in(checked: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": checked["model"], "messages": [], "max_tokens": checked["max_tokens"]}
    if checked.get("stream"):
        body["stream"] = True
    return body


def carried(raw: bytes, headers: Iterable[tuple[str, str]]) -> Carried:
    """The `Carried` request of a `POST /v1/messages` body `raw` sent with `headers`.

    Args:
        raw: the body as received.
        headers: the request's (name, value) pairs; the passed ones
            (`turnout.core.native.PASSED_HEADERS`) go in the carry.

    Raises:
        RequestRejected: 400 naming the field: the Messages checks
            (`wire.check_messages_request`: `model`, `max_tokens`,
            `messages.3.role`, ...), then the `provider` object
            (`provider.only[1]`), then a passed header whose value is not
            printable ASCII (`anthropic-beta`), which no provider could be sent.
    """
    try:
        checked = parse_messages_request(raw)
    except WireError as exc:
        raise RequestRejected(400, exc.message, param=exc.param, code="invalid_request") from exc
    preferences = take_preferences(checked)
    crossing: tuple[str, str] | None = None
    try:
        body = to_openai_request(checked)
    except WireError as exc:
        body, crossing = _stand_in(checked), (exc.message, exc.param)
    passed = provider_headers(MESSAGES, headers)
    return Carried(body, preferences, Native(surface=MESSAGES, body=raw, headers=passed, crossing=crossing))


def _error(status: int, message: str, request_id: str, headers: Mapping[str, str]) -> Response:
    return Response(
        error_body(status, message, request_id),
        status_code=status,
        media_type=JSON,
        headers={"x-request-id": request_id, **headers},
    )


def rendered(status: int, body: bytes, headers: Mapping[str, str], request_id: str, *, shape: str) -> Response:
    """The Anthropic answer for the fleet's (status, body, headers), `body` in `shape`.

    A 200 whose body is a native `messages` one is the provider's `message`, passed as is
    (its `model` what the provider wrote there, as the chat route passes its answers); a
    `chat` one (an OpenAI `chat.completion`) is translated (`to_anthropic_message`); an error
    (the gateway's, OpenAI-format) is put in Anthropic's error shape (`from_openai_error`).
    The `x-turnout-*` headers are kept, `content-length` / `content-type` set anew.
    """
    kept = {k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS}
    if status != 200:
        return Response(from_openai_error(status, body, request_id), status_code=status, headers=kept, media_type=JSON)
    if shape == MESSAGES:
        return Response(body, status_code=200, headers=kept, media_type=JSON)
    try:
        completion = _decode.decode(body)
    except msgspec.DecodeError:
        return _error(502, "The provider's answer could not be read.", request_id, kept)
    return Response(_encode.encode(to_anthropic_message(completion)), status_code=200, headers=kept, media_type=JSON)
