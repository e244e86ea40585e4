"""Anthropic Messages API <-> OpenAI Chat Completions: pure translation.

Owns: the request and response translations an Anthropic upstream needs
(OpenAI `chat.completion` request -> Anthropic `messages` request, Anthropic
`message` -> OpenAI `chat.completion`), the stop-reason and usage tables,
and the constants of the wire (version header, default `max_tokens`). The
streaming translation lives in `anthropic_events`; the client-facing
direction (Anthropic clients) in the ingress (`turnout_ingress.surfaces.messages.wire`).
Must not import: httpx, services, FastAPI, arq; no I/O, no clock (times are
passed in).

Sources: https://docs.anthropic.com/en/api/messages (request fields, content
blocks `text` / `image` / `tool_use` / `tool_result`, `tool_choice` types
`auto` / `any` / `tool` / `none`, `stop_reason` values, `usage` with
`cache_creation_input_tokens` / `cache_read_input_tokens`) and
https://platform.openai.com/docs/api-reference/chat/create.

Decisions (where the two APIs differ):

- `max_tokens` is required by Anthropic: `max_completion_tokens`, else
  `max_tokens`, else `DEFAULT_MAX_TOKENS` (4096 tokens).
- `system` / `developer` messages, wherever they stand, become the top-level
  `system` text (joined by a blank line, in order); a request of system text
  only is refused (`WireError` naming `messages`): Anthropic needs a user turn,
  and making one up would change the question (the target is skipped, another
  family may serve it).
- `temperature` is clamped to Anthropic's 0–1 range (OpenAI allows 0–2), so
  a fallback from an OpenAI model is not refused for it.
- Fields with no Anthropic counterpart that do not change what the answer is
  (`logprobs`, `seed`, `presence_penalty`, `stream_options`, a `response_format`
  of type `text`, ...) are dropped; `n` > 1, the legacy `function` role,
  non-image content parts and a `response_format` of type `json_schema` or
  `json_object` (the answer would not follow it) are refused (`WireError`: the
  target is skipped without a call, and with no other target a 400 names it).
- Prompt tokens in OpenAI usage include cache reads and cache writes
  (`prompt_tokens_details.cached_tokens` = reads; the writes are kept in the
  extension field `prompt_tokens_details.cache_creation_tokens`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from turnout.adapters import chat_parts
from turnout.adapters.chat_parts import chat_usage, data_url, function_specs, text_of, tool_call_inputs, user_parts

WireError = chat_parts.WireError
"""A request Anthropic cannot express (`turnout.adapters.chat_parts.WireError`; `param` names the field)."""
DEFAULT_MAX_TOKENS: Final = 4096
"""`max_tokens` sent when the OpenAI request gives no limit, in tokens."""
ANTHROPIC_VERSION: Final = "2023-06-01"
"""The `anthropic-version` header value this adapter speaks."""
MESSAGES_PATH: Final = "/v1/messages"
"""Appended to an `anthropic` provider's `base_url` (`https://api.anthropic.com`)."""

COUNT_PATH: Final = MESSAGES_PATH + "/count_tokens"
"""Anthropic's token count, under an `anthropic` provider's `base_url`."""
COUNT_FIELDS: Final = ("messages", "system", "tools", "tool_choice", "thinking")
"""The Messages request fields Anthropic's count_tokens reads (with `model`)."""

FINISH_REASON: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic `stop_reason` -> OpenAI `finish_reason` (unknown or null: `stop`)."""


def upstream_headers(passed: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The provider headers of a native call (SPEC §13): the client's `anthropic-version`
    (the first one sent; `ANTHROPIC_VERSION` when it sent none) and its `anthropic-beta`,
    value unchanged (several `anthropic-beta` lines: one header, their values joined by
    `,` in order, as RFC 9110 §5.3 combines a list header; absent: none).

    Args:
        passed: the client's passed headers (`turnout.core.native.passed_headers`: lower-case names).
    """
    versions = [value for name, value in passed if name == "anthropic-version"]
    betas = [value for name, value in passed if name == "anthropic-beta"]
    headers = [("anthropic-version", versions[0] if versions else ANTHROPIC_VERSION)]
    if betas:
        headers.append(("anthropic-beta", ",".join(betas)))
    return headers


# ------------------------------------------------------------------ requests


def image_block(url: str, param: str) -> dict[str, Any]:
    """An Anthropic image block for an OpenAI `image_url.url`.

    `data:<media type>;base64,<data>` becomes a `base64` source; `http(s)://`
    a `url` source.

    Raises:
        WireError: any other URL form.
    """
    if url.startswith("data:"):
        inline = data_url(url)
        if inline is None:
            raise WireError(f"`{param}` must be a base64 data URL or an http(s) URL.", param)
        return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise WireError(f"`{param}` must be a base64 data URL or an http(s) URL.", param)


def _image(url: Any, param: str) -> dict[str, Any]:
    if not isinstance(url, str):
        raise WireError(f"`{param}` is required.", param.removesuffix(".url"))
    return image_block(url, param)


def _user_blocks(content: Any, param: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(f"`{param}` must be a string or an array of parts.", param)
    return user_parts(content, param, text=lambda t: {"type": "text", "text": t}, image=_image, family="Anthropic")


def _tool_use_blocks(calls: Any, param: str) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.arguments}
        for c in tool_call_inputs(calls, param)
    ]


def _append(turns: list[dict[str, Any]], role: str, content: str | list[dict[str, Any]]) -> None:
    """Add a turn, merging it into the previous one of the same role (Anthropic alternates)."""
    if turns and turns[-1]["role"] == role:
        last = turns[-1]
        prior = last["content"]
        merged = [{"type": "text", "text": prior}] if isinstance(prior, str) else prior
        merged = merged + ([{"type": "text", "text": content}] if isinstance(content, str) else content)
        last["content"] = merged
    else:
        turns.append({"role": role, "content": content})


def _tools(tools: Any) -> list[dict[str, Any]]:
    return [
        {"name": f.name, "input_schema": f.parameters, **({"description": f.description} if f.description else {})}
        for f in function_specs(tools)
    ]


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    result: dict[str, Any] | None
    if choice is None:
        result = None
    elif choice == "auto":
        result = {"type": "auto"}
    elif choice == "none":
        result = {"type": "none"}
    elif choice == "required":
        result = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        result = {"type": "tool", "name": choice["function"].get("name")}
    else:
        raise WireError("`tool_choice` must be auto, none, required or a named function.", "tool_choice")
    if parallel is False:
        result = {**(result or {"type": "auto"}), "disable_parallel_tool_use": True}
    return result


def to_anthropic_request(body: dict[str, Any], model: str) -> dict[str, Any]:
    """An Anthropic `POST /v1/messages` body for an OpenAI chat request.

    Args:
        body: the OpenAI chat completion request (decoded JSON).
        model: the provider's model name for this target.

    Returns:
        The Anthropic request (JSON-ready dict); see the module doc for the
        decisions taken.

    Raises:
        WireError: a field that Anthropic cannot express (`param` names it).
    """
    if isinstance(body.get("n"), int) and body["n"] > 1:
        raise WireError("`n` greater than 1 is not supported by Anthropic providers.", "n")
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(body.get("messages") or []):
        param = f"messages[{i}]"
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            system.append(text_of(content, f"{param}.content"))
        elif role == "user":
            _append(turns, "user", _user_blocks(content, f"{param}.content"))
        elif role == "assistant":
            text = text_of(content, f"{param}.content")
            calls = message.get("tool_calls")
            if not calls:
                _append(turns, "assistant", text)
                continue
            blocks = [{"type": "text", "text": text}] if text else []
            _append(turns, "assistant", blocks + _tool_use_blocks(calls, f"{param}.tool_calls"))
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id", "")),
                "content": text_of(content, f"{param}.content"),
            }
            _append(turns, "user", [result])
        else:
            raise WireError(f"`{param}.role` {role!r} is not supported by Anthropic providers.", f"{param}.role")
    response_format = body.get("response_format")
    shape = response_format.get("type") if isinstance(response_format, dict) else None
    if shape in ("json_schema", "json_object"):  # dropped, the answer would be free text the client cannot parse
        raise WireError(
            f"`response_format` {shape} is not supported by Anthropic providers (the answer would not follow it).",
            "response_format",
        )
    if not turns:  # Anthropic's `messages` needs one turn: refused here, before a call that would be a 400
        raise WireError(
            "`messages` holds no user or assistant message (only system text): Anthropic providers need at least "
            "one user message.",
            "messages",
        )
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS
    out: dict[str, Any] = {"model": model, "max_tokens": limit, "messages": turns}
    if system:
        out["system"] = "\n\n".join(system)
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if isinstance(body.get("temperature"), (int, float)):
        out["temperature"] = min(max(float(body["temperature"]), 0.0), 1.0)
    if isinstance(body.get("top_p"), (int, float)):
        out["top_p"] = body["top_p"]
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
    choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
    if choice is not None:
        out["tool_choice"] = choice
    if isinstance(body.get("user"), str):
        out["metadata"] = {"user_id": body["user"]}
    if body.get("stream"):
        out["stream"] = True
    return out


# ----------------------------------------------------------------- responses


def openai_usage(usage: Any) -> dict[str, Any]:
    """OpenAI `usage` for an Anthropic `usage` object (cache tokens counted as prompt).

    `prompt_tokens` = `input_tokens` + `cache_creation_input_tokens` +
    `cache_read_input_tokens`; `completion_tokens` = `output_tokens`.
    """
    usage = usage if isinstance(usage, dict) else {}
    return chat_usage(
        fresh=int(usage.get("input_tokens") or 0),
        read=int(usage.get("cache_read_input_tokens") or 0),
        written=int(usage.get("cache_creation_input_tokens") or 0),
        output=int(usage.get("output_tokens") or 0),
    )


def finish_reason(stop_reason: Any) -> str:
    """OpenAI `finish_reason` for an Anthropic `stop_reason` (see `FINISH_REASON`)."""
    return FINISH_REASON.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def tool_call(block: dict[str, Any], arguments: str | None = None) -> dict[str, Any]:
    """An OpenAI tool call for an Anthropic `tool_use` block."""
    args = arguments if arguments is not None else json.dumps(block.get("input") or {}, separators=(",", ":"))
    function = {"name": block.get("name", ""), "arguments": args}
    return {"id": block.get("id", ""), "type": "function", "function": function}


def is_message(data: Any) -> bool:
    """True for an Anthropic `message` object (a 2xx body that is not an error)."""
    return isinstance(data, dict) and data.get("type") == "message" and isinstance(data.get("content"), list)


def to_openai_completion(message: dict[str, Any], *, created_s: int) -> dict[str, Any]:
    """An OpenAI `chat.completion` for an Anthropic `message`.

    Text blocks are concatenated into `content`; `tool_use` blocks become
    `tool_calls`; thinking and other blocks are dropped. `content` is null
    when the answer is only tool calls.

    Args:
        message: the Anthropic response body (decoded; `is_message` holds).
        created_s: `created`, integer epoch seconds.
    """
    text = "".join(b.get("text", "") for b in message["content"] if isinstance(b, dict) and b.get("type") == "text")
    calls = [tool_call(b) for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    reply: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None, "refusal": None}
    if calls:
        reply["tool_calls"] = calls
    return {
        "id": str(message.get("id", "")),
        "object": "chat.completion",
        "created": created_s,
        "model": str(message.get("model", "")),
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": finish_reason(message.get("stop_reason")),
            }
        ],
        "usage": openai_usage(message.get("usage")),
    }


def count_tokens_body(messages: dict[str, Any], model: str) -> dict[str, Any]:
    """The count_tokens body of a Messages request `messages` for `model`: its `COUNT_FIELDS`
    and `model` (`stream`, `max_tokens`, sampling fields left out: counting reads the input only).
    Source: https://docs.anthropic.com/en/api/messages-count-tokens. Pure."""
    return {"model": model, **{k: messages[k] for k in COUNT_FIELDS if k in messages}}
