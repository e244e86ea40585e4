"""OpenAI Responses requests -> the canonical chat request (pure).

Owns: checking a `POST /v1/responses` body and translating it into the OpenAI chat
request every family serves (`ResponsesCall`: the chat body, the fields the Response
echoes, the input items as `GET /v1/responses/{id}/input_items` lists them, and the
conversation messages of this turn). Tools, `tool_choice` and `text.format` are
`tools`'; the answer direction is `answer`, the stream's `events`.
Must not import: FastAPI, starlette, Redis; no I/O, no clock.

Sources: https://platform.openai.com/docs/api-reference/responses/create (request
fields, input items, tools, `text.format`), /docs/api-reference/chat/create (the chat
fields they become), the `openai` SDK's `openai/types/responses/` (item shapes).

Decisions (README "The Responses surface" has the table):

- `instructions` becomes a `system` message placed first; it is not part of the stored
  conversation (OpenAI: a previous response's instructions are not carried over).
- `input` items: messages (typed or plain, string content or `input_text` /
  `output_text` / `input_image` parts), `function_call` (an assistant tool call; calls
  right after an assistant message join it), `function_call_output` (a `tool` message),
  `reasoning` (dropped). Anything else is refused (400 naming `input[i].type`), as are
  file inputs (`input_image.file_id`, `input_file`): there is no file store here.
- `max_output_tokens` becomes `max_completion_tokens`, which both the OpenAI family and
  the Anthropic adapter (`turnout.adapters.anthropic_wire`) read; `reasoning.effort`
  becomes `reasoning_effort` (OpenAI-family targets; the Anthropic adapter drops it).
- Built-in tools (`web_search`, `file_search`, `code_interpreter`, `mcp`, ...) have no
  chat form: offered under `tool_choice` auto / none they are left out of the chat
  request; one that may be forced is refused (400 `unsupported_tool` naming
  `tools[i].type`), or with `defer_builtin` kept as `builtin_refusal` for the surface,
  which sends such a request only to `api: responses` offers (`native`). So are `prompt`,
  `conversation` and `background: true` (OpenAI-hosted features).
- Fields this gateway does not translate and that do not change the answer's content
  (`include`, `service_tier`, `prompt_cache_key`, `safety_identifier`, `top_logprobs`,
  `stream_options`, `truncation`, `max_tool_calls`, `text.verbosity`, unknown fields)
  are accepted and not sent upstream; `metadata`, `store` and `user` are kept on the Response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from turnout.core.limits import MAX_REQUEST_TOKENS
from turnout.errors import RequestRejected
from turnout_ingress.surfaces.responses.params import MessageSource
from turnout_ingress.surfaces.responses.tools import (
    FUNCTION_NAME,
    NAMESPACE_JOIN,
    chat_tools_of,
    invalid,
    shown,
    translate_format,
)

INPUT_ROLES: Final = frozenset({"user", "assistant", "system", "developer"})
"""Roles of an input message (OpenAI reference: `EasyInputMessage`, `ResponseInputMessageItem`)."""
EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
"""`reasoning.effort` values the OpenAI reference lists."""
REFUSED_FIELDS: Final = {
    "prompt": "Stored prompt templates are OpenAI-hosted; send `instructions` and `input` instead.",
    "conversation": "The Conversations API is not served by this gateway; chain turns with `previous_response_id`.",
}
"""Fields refused whenever they are given (not null), with why."""

_encode = msgspec.json.Encoder()

MAX_METADATA_KEYS: Final = 16
"""Most `metadata` pairs (OpenAI reference: "up to 16 key-value pairs", keys up to 64 characters, values 512)."""
VERBOSITIES: Final = ("low", "medium", "high")
SUMMARIES: Final = ("auto", "concise", "detailed")
"""`reasoning.summary` values (OpenAI reference)."""
"""`text.verbosity` values (OpenAI reference)."""
_CHOICES: Final = {"truncation": frozenset({"auto", "disabled"})}
"""Fields that take one of a few strings (OpenAI reference)."""
_INTEGERS: Final = {"max_tool_calls": (1, 2**31 - 1), "top_logprobs": (0, 20)}
"""Integer fields and their ranges (OpenAI reference)."""


@dataclass(frozen=True, kw_only=True)
class ResponsesCall:
    """A checked Responses request, translated.

    Attributes:
        chat: the canonical OpenAI chat request (without the stored conversation: the
            front door's `prepare` hook puts the previous turns in front of `turn`).
        instructions: the system message of `instructions`, or None.
        turn: the chat messages of this request's `input`, in order.
        input_items: `input` as Response input items (ids `<prefix>_<request id>_<n>`
            are given by `answer.with_ids`), for `input_items` pages.
        echo: the request fields the Response object echoes, OpenAI's defaults filled in.
        previous_response_id: the response this one continues, or None.
        store: whether the Response and its conversation are kept (default true).
        tools_left_out: the types of the built-in tools offered and left out
            (`tools.translate_tools`), in order, once each.
        sent_input: `input` as the client sent it, as a list of items (a string is one user
            message `{role, content}`): what a native follow-up replays (`native`).
        builtin_refusal: with `defer_builtin`, the 400 `unsupported_tool` a built-in tool that
            may be forced would have raised (only `api: responses` offers can serve the request);
            None when there is none.
        sources: the `input` items each message of `turn` came from (an error about the
            chat request names the client's field: `params.client_error`).
    """

    chat: dict[str, Any]
    instructions: dict[str, Any] | None
    turn: list[dict[str, Any]]
    input_items: list[dict[str, Any]]
    echo: dict[str, Any] = field(default_factory=dict)
    previous_response_id: str | None = None
    store: bool = True
    tools_left_out: tuple[str, ...] = ()
    sent_input: list[Any] = field(default_factory=list)
    builtin_refusal: RequestRejected | None = None
    sources: tuple[MessageSource, ...] = ()


def _text_of(part: dict[str, Any], param: str) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise invalid(f"`{param}.text` must be a string.", f"{param}.text")
    return text


def _content(content: Any, role: str, param: str) -> tuple[Any, list[dict[str, Any]]]:
    """A message's content as chat content and as Response input parts.

    Raises:
        RequestRejected: 400 naming the part (`input[2].content[0].file_id`).
    """
    if isinstance(content, str):
        kind = "output_text" if role == "assistant" else "input_text"
        return content, [{"type": kind, "text": content}]
    if not isinstance(content, list):
        raise invalid(f"`{param}` must be a string or an array of content parts.", param)
    chat: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        where = f"{param}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise invalid(f"`{where}` must be an object with a string `type`.", where)
        kind = str(part["type"])
        if kind in ("input_text", "output_text"):
            text = _text_of(part, where)
            chat.append({"type": "text", "text": text})
            parts.append({"type": kind, "text": text, **({"annotations": []} if kind == "output_text" else {})})
        elif kind == "refusal" and role == "assistant":
            refusal = part.get("refusal")
            if not isinstance(refusal, str):
                raise invalid(f"`{where}.refusal` must be a string.", f"{where}.refusal")
            chat.append({"type": "text", "text": refusal})
            parts.append({"type": "refusal", "refusal": refusal})
        elif kind == "input_image" and role != "assistant":
            if part.get("file_id") is not None:
                raise invalid(
                    f"`{where}.file_id`: file ids are not served by this gateway; send `image_url` "
                    "(a URL or a data URL).",
                    f"{where}.file_id",
                )
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                raise invalid(
                    f"`{where}.image_url` must be a non-empty string (a URL or a data URL).", f"{where}.image_url"
                )
            detail = part.get("detail")
            image: dict[str, Any] = {"url": url}
            if detail is not None:
                if detail not in ("low", "high", "auto"):
                    raise invalid(f"`{where}.detail` must be one of auto, high, low.", f"{where}.detail")
                image["detail"] = detail
            chat.append({"type": "image_url", "image_url": image})
            parts.append({"type": "input_image", "image_url": url, "detail": detail or "auto"})
        else:
            raise invalid(
                f"`{where}.type` {shown(kind)} is not supported in a `{role}` message by this gateway.", f"{where}.type"
            )
    if role == "assistant" or all(p["type"] == "text" for p in chat) and role in ("system", "developer"):
        return "".join(p["text"] for p in chat), parts
    return chat, parts


def _string(item: dict[str, Any], name: str, param: str) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise invalid(f"`{param}.{name}` is required: a non-empty string.", f"{param}.{name}")
    return value


def _tool_output(output: Any, param: str) -> str:
    """A `function_call_output`'s `output`: a string, or text parts joined."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = []
        for j, part in enumerate(output):
            if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text"):
                raise invalid(
                    f"`{param}.output[{j}]`: only text parts are supported in a tool's output.", f"{param}.output[{j}]"
                )
            texts.append(_text_of(part, f"{param}.output[{j}]"))
        return "".join(texts)
    raise invalid(f"`{param}.output` must be a string or an array of text parts.", f"{param}.output")


def translate_input(value: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], tuple[MessageSource, ...]]:
    """`input` (a string or an array of items) as chat messages and as Response input items.

    Returns:
        (chat messages, input items without ids, each message's source items
        (`params.MessageSource`, parallel to the messages)), each in the order
        given; `reasoning` items are dropped from both.

    Raises:
        RequestRejected: 400 naming the item or field at fault (`input[3].call_id`).
    """
    if isinstance(value, str):
        return (
            [{"role": "user", "content": value}],
            [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}],
            (MessageSource(0),),
        )
    if not isinstance(value, list) or not value:
        raise invalid("`input` is required: a string or a non-empty array of input items.", "input")
    messages: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    sources: list[MessageSource] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(f"`{where}` must be an object.", where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in INPUT_ROLES:
                raise invalid(f"`{where}.role` must be one of {', '.join(sorted(INPUT_ROLES))}.", f"{where}.role")
            content, parts = _content(item.get("content"), str(role), f"{where}.content")
            messages.append({"role": role, "content": content})
            sources.append(MessageSource(i))
            items.append({"type": "message", "role": role, "content": parts})
        elif kind == "function_call":
            call_id, name = _string(item, "call_id", where), _string(item, "name", where)
            if not FUNCTION_NAME.fullmatch(name):
                raise invalid(f"`{where}.name` must be 1 to 64 letters, digits, `_` or `-`.", f"{where}.name")
            space = item.get("namespace")
            if space is not None and not isinstance(space, str):
                raise invalid(f"`{where}.namespace` must be a string.", f"{where}.namespace")
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                raise invalid(f"`{where}.arguments` must be a string (JSON).", f"{where}.arguments")
            joined = f"{space}{NAMESPACE_JOIN}{name}" if space else name  # as `translate_tools` named it
            call = {"id": call_id, "type": "function", "function": {"name": joined, "arguments": arguments}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                sources[-1] = sources[-1]._replace(calls=(*sources[-1].calls, i))
                if last["content"] == "":
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                sources.append(MessageSource(i, (i,)))
            recorded = {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
            items.append({**recorded, "namespace": space} if space else recorded)
        elif kind == "function_call_output":
            call_id = _string(item, "call_id", where)
            output = _tool_output(item.get("output"), where)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            sources.append(MessageSource(i))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
        elif kind == "reasoning":
            continue
        else:
            raise invalid(
                f"`{where}.type` {shown(kind)} is not supported by this gateway (messages, function_call, "
                "function_call_output and reasoning items are).",
                f"{where}.type",
            )
    if not messages:
        raise invalid("`input` holds no message or tool item (reasoning items alone are dropped).", "input")
    return messages, items, tuple(sources)


_NUMBERS: Final = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}
"""Number fields and their ranges (OpenAI reference)."""
_BOOLEANS: Final = ("stream", "store", "parallel_tool_calls", "background")
"""Boolean fields (OpenAI reference)."""
DEFAULT_TEXT: Final = {"format": {"type": "text"}}
"""The `text` a Response echoes when the request sets none."""


def _check_scalars(data: dict[str, Any]) -> None:
    """The scalar fields' types and ranges.

    Raises:
        RequestRejected: 400 naming the field.
    """
    for name in _BOOLEANS:
        flag = data.get(name)
        if flag is not None and not isinstance(flag, bool):
            raise invalid(f"`{name}` must be a boolean.", name)
    for name, (low, high) in _NUMBERS.items():
        number = data.get(name)
        if number is not None and (
            isinstance(number, bool) or not isinstance(number, (int, float)) or not low <= number <= high
        ):
            raise invalid(f"`{name}` must be a number from {low:g} to {high:g}.", name)
    limit = data.get("max_output_tokens")
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REQUEST_TOKENS
    ):
        raise invalid(f"`max_output_tokens` must be an integer from 1 to {MAX_REQUEST_TOKENS}.", "max_output_tokens")
    for name in ("instructions", "user", "previous_response_id"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise invalid(f"`{name}` must be a string.", name)
    metadata = data.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict)
        or len(metadata) > MAX_METADATA_KEYS
        or not all(isinstance(v, str) and len(k) <= 64 and len(v) <= 512 for k, v in metadata.items())
    ):
        raise invalid(
            f"`metadata` must be an object of at most {MAX_METADATA_KEYS} string values (keys up to 64 "
            "characters, values up to 512).",
            "metadata",
        )
    for name, allowed in _CHOICES.items():
        value = data.get(name)
        if value is not None and value not in allowed:
            raise invalid(f"`{name}` must be one of {', '.join(sorted(allowed))}.", name)
    for name, (low, high) in _INTEGERS.items():
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise invalid(f"`{name}` must be an integer from {low} to {high}.", name)
    include = data.get("include")
    if include is not None and (not isinstance(include, list) or not all(isinstance(i, str) for i in include)):
        raise invalid("`include` must be an array of strings.", "include")
    tier = data.get("service_tier")
    if tier is not None and not isinstance(tier, str):
        raise invalid("`service_tier` must be a string.", "service_tier")
    text = data.get("text")
    if isinstance(text, dict) and text.get("verbosity") not in (None, *VERBOSITIES):
        raise invalid(f"`text.verbosity` must be one of {', '.join(VERBOSITIES)}.", "text.verbosity")
    for name, why in REFUSED_FIELDS.items():
        if data.get(name) is not None:
            raise invalid(f"`{name}` is not supported: {why}", name, code="unsupported_parameter")
    if data.get("background") is True:
        raise invalid(
            "`background: true` is not supported by this gateway; stream the response or wait for it.",
            "background",
            code="unsupported_parameter",
        )


def _reasoning(value: Any) -> tuple[dict[str, Any], str | None]:
    """`reasoning` as echoed (`{effort, summary}`) and the chat `reasoning_effort` (or None).

    Raises:
        RequestRejected: 400 naming `reasoning` or `reasoning.effort`.
    """
    if value is None:
        return {"effort": None, "summary": None}, None
    if not isinstance(value, dict):
        raise invalid("`reasoning` must be an object.", "reasoning")
    effort = value.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise invalid(f"`reasoning.effort` must be one of {', '.join(sorted(EFFORTS))}.", "reasoning.effort")
    summary = value.get("summary")
    if summary is not None and summary not in SUMMARIES:
        raise invalid(f"`reasoning.summary` must be one of {', '.join(SUMMARIES)}.", "reasoning.summary")
    return {"effort": effort, "summary": value.get("summary")}, effort


def translate_request(data: dict[str, Any], *, defer_builtin: bool = False) -> ResponsesCall:
    """The `ResponsesCall` of a decoded Responses body whose `model` is checked
    (`turnout_ingress.serving.validation.decode_request`) and whose `provider` object is taken out.

    Args:
        data: the decoded body.
        defer_builtin: a built-in tool that may be forced is not refused here but kept in
            `ResponsesCall.builtin_refusal` (the surface decides once it knows the offers).

    Raises:
        RequestRejected: 400 naming the field at fault (module doc for what is refused).
    """
    _check_scalars(data)
    sent = data.get("input")
    turn, items, sources = translate_input(sent)
    instructions = data.get("instructions")
    system = {"role": "system", "content": instructions} if instructions else None
    chat: dict[str, Any] = {"model": data["model"], "messages": ([system] if system else []) + turn}
    tools = data.get("tools")
    choice = data.get("tool_choice")
    left_out, deferred = chat_tools_of(chat, tools, choice, defer_builtin=defer_builtin)
    text = data.get("text")
    response_format = translate_format(text) if text is not None else None
    if response_format is not None:
        chat["response_format"] = response_format
    reasoning, effort = _reasoning(data.get("reasoning"))
    if effort is not None:
        chat["reasoning_effort"] = effort
    if data.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = data["max_output_tokens"]
    for name in ("temperature", "top_p", "parallel_tool_calls", "user"):
        if data.get(name) is not None:
            chat[name] = data[name]
    if data.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}  # `response.completed` carries the usage
    echo = {
        "instructions": instructions,
        "metadata": data.get("metadata") or {},
        "temperature": data.get("temperature", 1.0),
        "top_p": data.get("top_p", 1.0),
        "tools": list(tools or []),
        "tool_choice": choice if choice is not None else "auto",
        "parallel_tool_calls": data.get("parallel_tool_calls", True),
        "text": text if isinstance(text, dict) and text.get("format") is not None else DEFAULT_TEXT,
        "max_output_tokens": data.get("max_output_tokens"),
        "previous_response_id": data.get("previous_response_id"),
        "reasoning": reasoning,
        "store": data.get("store", True),
        "truncation": data.get("truncation") if data.get("truncation") in ("auto", "disabled") else "disabled",
        "user": data.get("user"),
        "background": False,
    }
    return ResponsesCall(
        chat=chat,
        instructions=system,
        turn=turn,
        input_items=items,
        echo=echo,
        previous_response_id=data.get("previous_response_id"),
        store=data.get("store", True) is not False,
        tools_left_out=tuple(dict.fromkeys(left_out)),
        sent_input=[{"role": "user", "content": sent}] if isinstance(sent, str) else list(sent or []),
        builtin_refusal=deferred,
        sources=sources,
    )
