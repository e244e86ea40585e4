"""Anthropic-format clients: request, response and error translation (pure).

Owns: checking a `POST /v1/messages` body, translating it into the internal
OpenAI chat request, translating the OpenAI `chat.completion` the fleet
answers back into an Anthropic `message`, every error body of that route in
Anthropic's shape `{"type": "error", "error": {"type", "message"},
"request_id"}`, and which requests' errors take that shape
(`answers_anthropic`). The stream translation is in `events`.
Must not import: FastAPI, starlette, Redis; no I/O.

Sources: https://docs.anthropic.com/en/api/messages and /en/api/errors.

Decisions (lossy where OpenAI has no field):

- `system` (string or text blocks) becomes the first `system` message; a
  `system`-role message in `messages` (as Claude Code and the current SDK
  send) becomes a `system` message in its place;
  `top_k`, `thinking`, `service_tier` and thinking blocks are dropped;
  `tool_result.is_error` is dropped; a `tool_result` with images, documents,
  server tools and other block types have no translation (`WireError`): an
  Anthropic target is sent the client's own body (SPEC §13, `native`),
  an OpenAI-family one is skipped as unable to express it.
- A `tool_result` block becomes a `tool` message placed where it stood, so
  it directly follows the assistant's `tool_calls`.
- `finish_reason` `stop` becomes `end_turn` (OpenAI does not say whether a
  stop sequence matched), `length` → `max_tokens`, `tool_calls` →
  `tool_use`, `content_filter` → `refusal`.
- Usage: `input_tokens` = prompt tokens less cache reads and writes
  (`prompt_tokens_details.cached_tokens` / `.cache_creation_tokens`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from turnout.adapters.chat_parts import WireError
from turnout.core.limits import MAX_REQUEST_TOKENS
from turnout.core.plan import MAX_MODEL_ID_CHARS
from turnout.json_reason import body_fault, json_refusal

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

STOP_REASON: Final[dict[str, str]] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
"""OpenAI `finish_reason` -> Anthropic `stop_reason` (unknown: `end_turn`)."""

_ERROR_TYPE: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


ANTHROPIC_UNAUTHORIZED: Final = (
    "Invalid or missing gateway key. Send it as `x-api-key: <key>` (or `Authorization: Bearer <key>`)."
)
"""The 401 message for Anthropic callers (the Anthropic SDKs send `x-api-key`)."""


def on_anthropic_surface(path: str) -> bool:
    """Whether a request `path` is `/v1/messages` or under it, where every error is in Anthropic's shape."""
    return path == "/v1/messages" or path.startswith("/v1/messages/")


def answers_anthropic(path: str, headers: Mapping[str, str]) -> bool:
    """Whether a request to `path` with `headers` (lower-case names) gets its errors in Anthropic's shape:
    on the Anthropic surface (`on_anthropic_surface`) always; on `/v1/models` and under it when it sends
    `anthropic-version`, as the Anthropic SDKs always do (README "The Anthropic surface": that route then
    answers in Anthropic's shape, its errors included)."""
    if on_anthropic_surface(path):
        return True
    return (path == "/v1/models" or path.startswith("/v1/models/")) and "anthropic-version" in headers


def error_type_for(status: int) -> str:
    """Anthropic's `error.type` for an HTTP status (the gateway's 502 → `api_error`,
    503 → `overloaded_error`, 504 → `timeout_error`; other 4xx
    `invalid_request_error`, other 5xx `api_error`)."""
    return _ERROR_TYPE.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")


def error_body(status: int, message: str, request_id: str, **extra: Any) -> bytes:
    """An Anthropic error body for `status`; `extra` fields (e.g. `attempts`) go into `error`."""
    error = {"type": error_type_for(status), "message": message, **{k: v for k, v in extra.items() if v is not None}}
    return _encode.encode({"type": "error", "error": error, "request_id": request_id})


def from_openai_error(status: int, body: bytes, request_id: str) -> bytes:
    """The Anthropic error body for a gateway answer in OpenAI's error format.

    The message, `code`, `param` and the per-attempt summary (`attempts`)
    are kept; the type follows the status (`error_type_for`).
    """
    try:
        data = _decode.decode(body)
    except (msgspec.DecodeError, RecursionError):
        data = None
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return error_body(status, body[:300].decode("utf-8", "replace") or "error", request_id)
    extra = {k: v for k, v in err.items() if k not in ("message", "type")}
    return error_body(status, str(err.get("message", "")), request_id, **extra)


# ------------------------------------------------------------------ requests


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _fail(message: str, param: str) -> WireError:
    return WireError(f"{param}: {message}", param)


def _wanted(data: dict[str, Any], field: str, shape: str) -> str:
    """`Field required` when `field` is absent or null, else what it should be."""
    return f"Field required ({shape})" if data.get(field) is None else f"Input should be {shape}"


def parse_messages_request(raw: bytes) -> dict[str, Any]:
    """Decode and check an Anthropic Messages body (`decode_messages_body`, then `check_messages_request`).

    Raises:
        WireError: with `param` naming the field (answered as a 400).
    """
    return check_messages_request(decode_messages_body(raw))


def decode_messages_body(raw: bytes) -> dict[str, Any]:
    """A Messages-API body decoded: a JSON object, else a `WireError` on `body` (empty, not JSON,
    nested too deeply, not an object)."""
    if not raw.strip():
        raise _fail("the request body is empty; send a JSON object", "body")
    try:
        data = _decode.decode(raw)
    except msgspec.DecodeError as exc:
        reason, field = json_refusal(raw, exc)  # a number no float holds: its field leads, as other fields' errors
        raise _fail(f"the request body {body_fault(reason)} ({reason})", field or "body") from exc
    except RecursionError as exc:
        raise _fail("the request body is nested too deeply", "body") from exc
    if not isinstance(data, dict):
        raise _fail("the request body must be a JSON object", "body")
    return data


def check_messages_request(data: dict[str, Any]) -> dict[str, Any]:
    """Check a decoded Messages body (the API's required fields); `data` itself.

    Checks: `model` a non-empty string; `max_tokens` a positive integer up to
    `MAX_REQUEST_TOKENS`; `messages` a non-empty array of `user` / `assistant` / `system`
    turns whose content is a string or an array of blocks; `system` a string or an
    array of text blocks; `stream` a boolean; `temperature` and `top_p` from
    0 to 1; `top_k` a non-negative integer; `stop_sequences` an array of
    strings; `tools` client tools with a `name` (`TOOL_NAME`) and an
    `input_schema` object; `metadata` an object (`user_id` a string);
    `thinking` an object with a string `type`.

    Raises:
        WireError: with `param` naming the field (answered as a 400).
    """
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _fail(_wanted(data, "model", "a non-empty string"), "model")
    if len(model) > MAX_MODEL_ID_CHARS:
        raise _fail(f"must be at most {MAX_MODEL_ID_CHARS} characters (got {len(model)})", "model")
    limit = data.get("max_tokens")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise _fail(_wanted(data, "max_tokens", "a positive integer"), "max_tokens")
    if limit > MAX_REQUEST_TOKENS:
        raise _fail(f"must be at most {MAX_REQUEST_TOKENS} (got {limit})", "max_tokens")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _fail(_wanted(data, "messages", "a non-empty array"), "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise _fail("each message needs a role of `user`, `assistant` or `system`", f"messages.{i}.role")
        if not isinstance(message.get("content"), (str, list)):
            raise _fail("must be a string or an array of content blocks", f"messages.{i}.content")
    system = data.get("system")
    if system is not None and not isinstance(system, (str, list)):
        raise _fail("must be a string or an array of text blocks", "system")
    if data.get("stream") is not None and not isinstance(data["stream"], bool):
        raise _fail("must be a boolean", "stream")
    for name in ("temperature", "top_p"):  # both 0 to 1 in the Messages API reference
        number = data.get(name)
        if number is not None and (
            isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number <= 1
        ):
            raise _fail("Input should be a number from 0 to 1", name)
    top_k = data.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise _fail("Input should be a non-negative integer", "top_k")
    stops = data.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list):
            raise _fail(_wanted(data, "stop_sequences", "an array of strings"), "stop_sequences")
        for i, stop in enumerate(stops):
            if not isinstance(stop, str):
                raise _fail("Input should be a string", f"stop_sequences.{i}")
    _check_tools(data.get("tools"))
    metadata = data.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise _fail(_wanted(data, "metadata", "an object"), "metadata")
        if metadata.get("user_id") is not None and not isinstance(metadata["user_id"], str):
            raise _fail("Input should be a string", "metadata.user_id")
    thinking = data.get("thinking")
    if thinking is not None and not (isinstance(thinking, dict) and isinstance(thinking.get("type"), str)):
        raise _fail("must be an object with a string `type` (`enabled` or `disabled`)", "thinking")
    return data


TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A client tool's name this route accepts: what both APIs take (the Messages API's pattern, and OpenAI's
function names, 1 to 64 of these characters), since the request may be sent on to either."""


def _check_tools(tools: Any) -> None:
    """`tools`, when given: an array of objects; each client tool (no `type`, or `custom`) with a `name`
    (`TOOL_NAME`) and an `input_schema` object. Server tools are refused later (`_tools`)."""
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _fail("must be an array", "tools")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _fail("must be an object", f"tools.{i}")
        if tool.get("type") not in (None, "custom"):
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise _fail("must be 1 to 64 letters, digits, `_` or `-`", f"tools.{i}.name")
        if not isinstance(tool.get("input_schema"), dict):
            raise _fail("must be an object (a JSON Schema)", f"tools.{i}.input_schema")


def _block_text(blocks: Any, param: str) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise _fail("must be a string or an array of text blocks", param)
    texts = []
    for j, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _fail("only text blocks are supported here", f"{param}.{j}")
        texts.append(_text(block, f"{param}.{j}"))
    return "".join(texts)


def _text(block: dict[str, Any], param: str) -> str:
    """A text block's `text`, which the Messages API requires as a string (empty allowed)."""
    return _string(block, "text", param, empty=True)


def _string(block: dict[str, Any], field: str, param: str, *, empty: bool = False) -> str:
    """A block's required string `field` (a tool block's `id`, `name`, `tool_use_id`: not empty
    unless `empty`), or a `WireError` naming `<param>.<field>`."""
    value = block.get(field)
    if not isinstance(value, str) or not (value or empty):
        raise _fail(_wanted(block, field, "a string" if empty else "a non-empty string"), f"{param}.{field}")
    return value


def _image_url(source: Any, param: str) -> str:
    if isinstance(source, dict) and source.get("type") == "base64":
        return f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
    if isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    raise _fail("image sources must be `base64` or `url`", param)


def _unsupported_block(block: Any, param: str) -> WireError:
    """The error for a content block this gateway cannot take: a type it does not translate, or
    something that is not a block at all (an object with a string `type`)."""
    kind = block.get("type") if isinstance(block, dict) else None
    if isinstance(kind, str):
        return _fail(f"content block type {kind[:40]!r} is not supported by this gateway", param)
    got = "an object without a string `type`" if isinstance(block, dict) else f"`{json.dumps(block)[:40]}`"
    return _fail(f"each content block must be an object with a string `type`, got {got}", param)


def _user_turn(content: list[Any], param: str, out: list[dict[str, Any]]) -> None:
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            one_text = len(parts) == 1 and parts[0]["type"] == "text"
            out.append({"role": "user", "content": parts[0]["text"] if one_text else list(parts)})
            parts.clear()

    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": _text(block, f"{param}.{j}")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block.get("source"), f"{param}.{j}")}})
        elif kind == "tool_result":
            flush()
            text = _block_text(block.get("content", ""), f"{param}.{j}.content")
            call_id = _string(block, "tool_use_id", f"{param}.{j}")
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            raise _unsupported_block(block, f"{param}.{j}")
    flush()


def _assistant_turn(content: list[Any], param: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(_text(block, f"{param}.{j}"))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, separators=(",", ":"))
            calls.append(
                {
                    "id": _string(block, "id", f"{param}.{j}"),
                    "type": "function",
                    "function": {"name": _string(block, "name", f"{param}.{j}"), "arguments": arguments},
                }
            )
        elif kind not in ("thinking", "redacted_thinking"):
            raise _unsupported_block(block, f"{param}.{j}")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise _fail("must be an array", "tools")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or "input_schema" not in tool or tool.get("type") not in (None, "custom"):
            raise _fail("only client tools with an `input_schema` are supported", f"tools.{i}")
        fn: dict[str, Any] = {"name": tool.get("name"), "parameters": tool["input_schema"]}
        if tool.get("description"):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any, out: dict[str, Any]) -> None:
    kind = choice.get("type") if isinstance(choice, dict) else None
    mapped = {"auto": "auto", "any": "required", "none": "none"}.get(kind or "")
    if kind == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif mapped is not None:
        out["tool_choice"] = mapped
    else:
        raise _fail("must be an object whose `type` is auto, any, tool or none", "tool_choice")
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False


def to_openai_request(body: dict[str, Any]) -> dict[str, Any]:
    """The internal OpenAI chat request for a checked Anthropic Messages body.

    Raises:
        WireError: a block or field this gateway cannot carry (`param` names it).
    """
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _block_text(body["system"], "system")})
    for i, turn in enumerate(body["messages"]):
        content = turn["content"]
        if turn["role"] == "system":
            messages.append({"role": "system", "content": _block_text(content, f"messages.{i}.content")})
        elif isinstance(content, str):
            messages.append({"role": turn["role"], "content": content})
        elif turn["role"] == "user":
            _user_turn(content, f"messages.{i}.content", messages)
        else:
            messages.append(_assistant_turn(content, f"messages.{i}.content"))
    out: dict[str, Any] = {"model": body["model"], "messages": messages, "max_tokens": body["max_tokens"]}
    for name in ("temperature", "top_p"):
        if isinstance(body.get(name), (int, float)):
            out[name] = body[name]
    if body.get("stop_sequences"):
        out["stop"] = list(body["stop_sequences"])
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], out)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    if body.get("stream"):
        out["stream"] = True
    return out


# ----------------------------------------------------------------- responses


def anthropic_usage(usage: Any) -> dict[str, int]:
    """Anthropic `usage` for an OpenAI `usage` object (see the module doc)."""
    usage = usage if isinstance(usage, dict) else {}
    details = _dict(usage.get("prompt_tokens_details"))
    read = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_creation_tokens") or 0)
    return {
        "input_tokens": max(0, int(usage.get("prompt_tokens") or 0) - read - written),
        "output_tokens": int(usage.get("completion_tokens") or 0),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
    }


def message_id(openai_id: str) -> str:
    """An Anthropic-looking message id (`msg_...`) for an OpenAI completion id."""
    return openai_id if openai_id.startswith("msg_") else f"msg_{openai_id}"


def to_anthropic_message(completion: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic `message` for an OpenAI `chat.completion` (first choice).

    Text (or, without text, the refusal) becomes one text block; tool calls
    become `tool_use` blocks (arguments that are not a JSON object: `{}`).
    """
    choices = completion.get("choices") or [{}]
    choice = _dict(choices[0])
    reply = _dict(choice.get("message"))
    content = reply.get("content")
    text = (
        content
        if isinstance(content, str)
        else "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    )
    blocks: list[dict[str, Any]] = []
    if text or reply.get("refusal"):
        blocks.append({"type": "text", "text": text or str(reply["refusal"])})
    for call in reply.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            tool_input = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            tool_input = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id", ""),
                "name": fn.get("name", ""),
                "input": tool_input if isinstance(tool_input, dict) else {},
            }
        )
    return {
        "id": message_id(str(completion.get("id", ""))),
        "type": "message",
        "role": "assistant",
        "model": str(completion.get("model", "")),
        "content": blocks,
        "stop_reason": STOP_REASON.get(str(choice.get("finish_reason")), "end_turn"),
        "stop_sequence": None,
        "usage": anthropic_usage(completion.get("usage")),
    }
