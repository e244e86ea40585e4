"""Reading an OpenAI chat request's parts, for the families that translate it (pure).

Owns: what the translating families (`anthropic_wire`, `bedrock_wire`, `gemini_wire`) read
of an OpenAI Chat Completions request, each refusal a `WireError` naming the field: the text
of a message content (`text_of`), a user content's parts (`user_parts`, and `content_parts`
for a content that may be a string: text and image parts, each given to the family's own
block builder), a `data:` URL (`data_url`), an assistant message's tool calls with their
arguments decoded (`tool_call_inputs`, or with the call itself: `function_calls`) and the
function tools (`function_specs`, or their `function` objects: `function_tools`); and the
OpenAI `usage` object the answers become (`chat_usage`).
Must not import: httpx, services, FastAPI, arq; no I/O, no clock.

Source: https://platform.openai.com/docs/api-reference/chat/create (message content as a
string or parts, `tool_calls[].function.arguments` a JSON string, `tools[].function`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple


class WireError(ValueError):
    """A request that cannot be expressed in the other API; `param` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class ToolInput(NamedTuple):
    """One assistant tool call: its id, the function's name and its decoded arguments."""

    call_id: str
    name: str
    arguments: dict[str, Any]


class FunctionSpec(NamedTuple):
    """One function tool: name, description (None when absent or empty) and JSON schema."""

    name: Any
    description: str | None
    parameters: dict[str, Any]


def text_of(content: Any, param: str) -> str:
    """The text of a message content: a string, or text (and refusal) parts joined; None is "".

    Raises:
        WireError: another part, or content of another type (`param` and the part named).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("text", "refusal"):
                raise WireError(f"`{param}[{i}]` must be a text part here.", f"{param}[{i}]")
            texts.append(str(part.get("text") or part.get("refusal") or ""))
        return "".join(texts)
    raise WireError(f"`{param}` must be a string or an array of parts.", param)


def user_parts(
    content: list[Any],
    param: str,
    *,
    text: Callable[[str], dict[str, Any]],
    image: Callable[[Any, str], dict[str, Any]],
    family: str,
) -> list[dict[str, Any]]:
    """A user content's parts as the family's blocks: `text(part text)` for a text part,
    `image(url, param of the url)` for an image part (the url as sent, maybe not a string).

    Raises:
        WireError: a part of another type (`{param}[i]`), or what `image` raises.
    """
    blocks: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(text(str(part.get("text", ""))))
        elif kind == "image_url":
            url = part.get("image_url")
            blocks.append(image(url.get("url") if isinstance(url, dict) else url, f"{param}[{i}].image_url.url"))
        else:
            raise WireError(
                f"`{param}[{i}]`: content part type {kind!r} is not supported by {family} providers.", f"{param}[{i}]"
            )
    return blocks


def data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:<media type>;base64,<data>` URL, or None for any other."""
    header, sep, data = url[5:].partition(",") if url.startswith("data:") else ("", "", "")
    media_type, _, encoding = header.partition(";")
    return (media_type, data) if sep and encoding == "base64" and media_type else None


def content_parts(
    content: Any,
    param: str,
    *,
    text: Callable[[str], dict[str, Any]],
    image: Callable[[str, str], dict[str, Any]],
    family: str,
) -> list[dict[str, Any]]:
    """`user_parts` of a content that may also be a string (one text part); an image's URL must
    be a string (`image(url, its param)`).

    Raises:
        WireError: content neither a string nor an array, an image without a URL, any other part.
    """
    if isinstance(content, str):
        return [text(content)]
    if not isinstance(content, list):
        raise WireError(f"`{param}` must be a string or an array of parts.", param)

    def picture(url: Any, where: str) -> dict[str, Any]:
        if not isinstance(url, str):
            raise WireError(f"`{where}` is required.", where.removesuffix(".url"))
        return image(url, where)

    return user_parts(content, param, text=text, image=picture, family=family)


def tool_call_inputs(calls: Any, param: str) -> list[ToolInput]:
    """An assistant message's `tool_calls`, each with its arguments decoded (absent or empty: `{}`).

    Raises:
        WireError: not an array, a call without a function name, arguments that are not a JSON object.
    """
    if not isinstance(calls, list):
        raise WireError(f"`{param}` must be an array.", param)
    found = []
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise WireError(f"`{param}[{i}].function.name` is required.", f"{param}[{i}]")
        arguments = fn.get("arguments") or "{}"
        try:
            tool_input = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError as exc:
            raise WireError(
                f"`{param}[{i}].function.arguments` is not valid JSON.", f"{param}[{i}].function.arguments"
            ) from exc
        if not isinstance(tool_input, dict):
            raise WireError(
                f"`{param}[{i}].function.arguments` must be a JSON object.", f"{param}[{i}].function.arguments"
            )
        found.append(ToolInput(str(call.get("id", "")), fn["name"], tool_input))
    return found


def function_calls(calls: Any, param: str) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(the call itself, function name, arguments object) of each of an assistant's `tool_calls`
    (the call kept for what a family carries beside it, e.g. Gemini's thought signature).

    Raises:
        WireError: as `tool_call_inputs`.
    """
    return [(call, t.name, t.arguments) for call, t in zip(calls, tool_call_inputs(calls, param), strict=True)]


def function_tools(tools: Any, family: str | None = None) -> list[dict[str, Any]]:
    """The `function` objects of a request's `tools` (each `{"type": "function", "function": {...}}`).

    Raises:
        WireError: not an array, or a tool of another type (`tools[i]`; the message names
            `family`'s providers when given).
    """
    if not isinstance(tools, list):
        raise WireError("`tools` must be an array.", "tools")
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            where = f" for {family} providers" if family else ""
            raise WireError(f"`tools[{i}]` must be a function tool{where}.", f"tools[{i}]")
        out.append(fn)
    return out


def function_specs(tools: Any) -> list[FunctionSpec]:
    """The request's function tools (a tool without `parameters`: an empty object schema).

    Raises:
        WireError: not an array, or a tool that is not a function tool (`tools[i]`).
    """
    return [
        FunctionSpec(
            fn.get("name"), fn.get("description") or None, fn.get("parameters") or {"type": "object", "properties": {}}
        )
        for fn in function_tools(tools)
    ]


def chat_usage(*, fresh: int, read: int, written: int, output: int) -> dict[str, Any]:
    """OpenAI `usage` for token counts of a provider that reports cache reads and writes apart from
    fresh input: `prompt_tokens` = fresh + read + written (`prompt_tokens_details.cached_tokens` =
    read, `cache_creation_tokens` = written), `completion_tokens` = output."""
    prompt = fresh + read + written
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": read, "cache_creation_tokens": written},
    }
