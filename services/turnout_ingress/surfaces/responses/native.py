"""`POST /v1/responses` as the client sent it, for `api: responses` offers: the carry in, the answer out.

Owns the Responses half of "same family, same bytes" (SPEC §13, README "The Responses surface"):
- `carried`: the client's own request (`turnout.core.native.Native`, surface `responses`, its
  `openai-beta` header); a request with a built-in tool that may be forced has no chat form, so
  its carry names why (`Native.crossing`) and every chat-api offer skips it;
- `upstream_body`: the body an `api: responses` offer receives, the conversation being the
  gateway's: `previous_response_id` taken out and, with it, the stored conversation's items put
  in front of `input`; `store: false` (Turnout keeps the Response). The router then sets `model`
  and takes `provider` out (`turnout.core.native.native_body`); nothing else changes;
- `replayable`: a Response's output items as the input items of a later turn (and
  `items_of_messages`: a conversation stored before its items were kept, from its chat messages);
- `client_response`: the provider's Response as the client gets it: its `id` Turnout's
  (`resp_<request id>`, so `GET` and follow-ups find it in Turnout's store), `store` and
  `previous_response_id` as the client sent them;
- `native_stream`: a native stream's events relayed as sent but for the same three fields of
  the Response its `response.*` events carry, the Response kept before the last event, and the
  relay's own final `error` event numbered after the provider's last.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`; no I/O but the keeper's.
Source: https://platform.openai.com/docs/api-reference/responses.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Final

import msgspec

from turnout.core.native import RESPONSES, Native
from turnout_ingress.serving.validation import provider_headers
from turnout_ingress.surfaces.responses.answer import response_id
from turnout_ingress.surfaces.responses.request import ResponsesCall

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

KEPT_STATUSES: Final = ("completed", "incomplete")
"""Statuses of a Response that is kept (a failed one is not)."""
_TERMINAL: Final = frozenset({"response.completed", "response.incomplete"})
_ID_DROPPED: Final = frozenset({"message", "function_call"})
"""Output item types replayed without their `id`: an upstream told `store: false` keeps no item to
refer to, and these need none (a function call is matched by its `call_id`)."""


def carried(raw: bytes, headers: Iterable[tuple[str, str]], call: ResponsesCall) -> Native:
    """The native carry of a Responses body `raw` (already checked into `call`).

    Raises:
        RequestRejected: 400 naming a passed header (`openai-beta`) whose value is not printable
            ASCII, which no provider could be sent.
    """
    passed = provider_headers(RESPONSES, headers)
    refusal = call.builtin_refusal
    crossing = None
    if refusal is not None:
        param = refusal.param or "tools"
        why = f"the built-in tool at `{param}` may be forced by `tool_choice` and has no chat form: only "
        crossing = (why + "`api: responses` offers serve this request", param)
    return Native(surface=RESPONSES, body=raw, headers=passed, crossing=crossing)


def upstream_body(body: bytes, history: list[Any] | None) -> bytes:
    """The client's Responses `body` with the gateway's conversation state applied (module doc).

    Args:
        body: the JSON object as the client sent it.
        history: the stored conversation's items when the request continues one
            (`previous_response_id`), put in front of its `input`; None: `input` unchanged.

    Returns:
        The body with `previous_response_id` removed, `store` false, and `input` as above;
        every other field kept, in order, with its value.

    Raises:
        ValueError, TypeError: `body` is not JSON, or not an object (the surface checked it: never raised there).
    """
    try:
        data = _decode.decode(body)
    except msgspec.DecodeError as exc:
        raise ValueError("the Responses body is not JSON") from exc
    if not isinstance(data, dict):
        raise TypeError("the Responses body is not a JSON object")
    data.pop("previous_response_id", None)
    if history is not None:
        sent = data.get("input")
        data["input"] = history + ([{"role": "user", "content": sent}] if isinstance(sent, str) else list(sent or []))
    data["store"] = False
    return _encode.encode(data)


def replayable(output: list[Any]) -> list[Any]:
    """A Response's `output` items as input items of a later turn: `message` and `function_call`
    items without their `id` (`_ID_DROPPED`), the others (reasoning, built-in tool calls) as they are."""
    out: list[Any] = []
    for item in output:
        if isinstance(item, dict) and item.get("type") in _ID_DROPPED:
            out.append({k: v for k, v in item.items() if k != "id"})
        else:
            out.append(item)
    return out


def _parts(content: Any, role: str) -> Any:
    """Chat content as Responses content: a string as is; text parts as `input_text` (`output_text`
    for the assistant), image parts as `input_image`; other parts dropped."""
    if not isinstance(content, list):
        return "" if content is None else content
    text_type = "output_text" if role == "assistant" else "input_text"
    out: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            out.append({"type": text_type, "text": str(part.get("text") or "")})
        elif part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
            out.append({"type": "input_image", "image_url": part["image_url"].get("url"), "detail": "auto"})
    return out


def items_of_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored conversation's chat messages as Responses input items, for a conversation stored
    before its items were kept (`StoredResponse.items` None): a message is `{role, content}`, an
    assistant's tool calls `function_call` items (`call_id`, `name`, `arguments`), a `tool`
    message a `function_call_output`. Pure."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = str(message.get("role") or "user")
        if role == "tool":
            output = message.get("content")
            text = output if isinstance(output, str) else "".join(p.get("text", "") for p in _parts(output, "tool"))
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": text})
            continue
        content = _parts(message.get("content"), role)
        if content:
            items.append({"role": role, "content": content})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments") or "",
                }
            )
    return items


def client_response(response: dict[str, Any], *, request_id: str, echo: dict[str, Any]) -> dict[str, Any]:
    """The provider's Response as the client gets it: `id` `resp_<request_id>`, `store` and
    `previous_response_id` as the client sent them (`echo`, `ResponsesCall.echo`); the rest as is."""
    return {
        **response,
        "id": response_id(request_id),
        "previous_response_id": echo.get("previous_response_id"),
        "store": echo.get("store", True),
    }


def _data_line(event: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(the lines before the data line, the data, the lines after) of one SSE event, or None."""
    start = event.find(b"data: ")
    if start < 0 or (start > 0 and event[start - 1 : start] != b"\n"):
        return None
    end = event.find(b"\n", start)
    end = len(event) if end < 0 else end
    return event[:start], event[start + 6 : end], event[end:]


async def native_stream(
    frames: AsyncIterable[bytes],
    *,
    request_id: str,
    echo: dict[str, Any],
    keeper: Callable[[dict[str, Any]], Awaitable[None]] | None,
) -> AsyncIterator[bytes]:
    """A native Responses stream as the client gets it (module doc).

    Args:
        frames: the relay's writes (whole SSE events, as the provider sent them, then possibly
            the relay's final `error` event).
        request_id: the gateway's request id (the Response's id derives from it).
        echo: the client's echoed fields (`store`, `previous_response_id`).
        keeper: awaited with the final Response (completed or incomplete) before its event
            goes out; None: nothing is kept.
    """
    last_number = -1
    pending = b""
    async for frame in frames:
        pending += bytes(frame)
        *events, pending = pending.split(b"\n\n")
        out: list[bytes] = []
        for event in events:
            if not event.strip():
                continue
            parts = _data_line(event)
            data = None
            if parts is not None:
                try:
                    data = _decode.decode(parts[1])
                except msgspec.DecodeError:
                    data = None
            if not isinstance(data, dict) or parts is None:
                out.append(event + b"\n\n")
                continue
            number = data.get("sequence_number")
            changed = False
            if isinstance(number, int):
                last_number = max(last_number, number)
            elif data.get("type") == "error":  # the relay's own final event
                data["sequence_number"] = last_number + 1
                changed = True
            response = data.get("response")
            if isinstance(response, dict):
                data["response"] = client_response(response, request_id=request_id, echo=echo)
                changed = True
                if keeper is not None and data.get("type") in _TERMINAL:
                    await keeper(data["response"])
            head, _, tail = parts
            out.append(head + b"data: " + _encode.encode(data) + tail + b"\n\n" if changed else event + b"\n\n")
        if out:
            yield b"".join(out)
    if pending.strip():
        yield pending
