"""An OpenAI chat request read part by part, for the families that translate it to another API.

Owns: `WireError` (a request another API cannot express, naming the field) and the readers
the translating families share (`turnout.adapters.anthropic_wire`, `turnout.adapters.gemini_wire`):
a message's text (`text_of`), a `data:` URL (`data_url`), a user message's parts in another
form (`content_parts`), an assistant's tool calls with their arguments parsed
(`function_calls`) and a request's function tools (`function_tools`).
Must not import: httpx, services, FastAPI, arq; no I/O. Pure functions of their arguments.

Source: https://platform.openai.com/docs/api-reference/chat/create (message content parts
`text`, `refusal`, `image_url`; `tool_calls[].function.arguments` as JSON text; `tools[]` of
type `function`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class WireError(ValueError):
    """A request that cannot be expressed in the other API; `param` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def text_of(content: Any, param: str) -> str:
    """The text of an OpenAI message content (a string, or text / refusal parts joined; None: "").

    Raises:
        WireError: another part, or content of another type (`param` names it).
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
    """A user message's content parts in another API's form: `text(the text)` for a text part,
    `image(url, its param)` for an `image_url` part (a string content is one text part).

    Raises:
        WireError: any other part or content (the message names `family`'s providers).
    """
    if isinstance(content, str):
        return [text(content)]
    if not isinstance(content, list):
        raise WireError(f"`{param}` must be a string or an array of parts.", param)
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(text(str(part.get("text", ""))))
        elif kind == "image_url":
            picture = part.get("image_url")
            url = picture.get("url") if isinstance(picture, dict) else picture
            if not isinstance(url, str):
                raise WireError(f"`{param}[{i}].image_url.url` is required.", f"{param}[{i}].image_url")
            parts.append(image(url, f"{param}[{i}].image_url.url"))
        else:
            raise WireError(
                f"`{param}[{i}]`: content part type {kind!r} is not supported by {family} providers.", f"{param}[{i}]"
            )
    return parts


def function_calls(calls: Any, param: str) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(call, function name, arguments object) of each of an assistant's `tool_calls`.

    Raises:
        WireError: not a list, a call without a function name, or arguments that are not a JSON object.
    """
    if not isinstance(calls, list):
        raise WireError(f"`{param}` must be an array.", param)
    out = []
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise WireError(f"`{param}[{i}].function.name` is required.", f"{param}[{i}]")
        arguments = fn.get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError as exc:
            raise WireError(f"`{param}[{i}].function.arguments` is not valid JSON.", f"{param}[{i}]") from exc
        if not isinstance(parsed, dict):
            raise WireError(f"`{param}[{i}].function.arguments` must be a JSON object.", f"{param}[{i}]")
        out.append((call, fn["name"], parsed))
    return out


def function_tools(tools: Any, family: str) -> list[dict[str, Any]]:
    """The `function` objects of a request's `tools` (each `{"type": "function", "function": {...}}`).

    Raises:
        WireError: not a list, or a tool of another type (the message names `family`'s providers).
    """
    if not isinstance(tools, list):
        raise WireError("`tools` must be an array.", "tools")
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise WireError(f"`tools[{i}]` must be a function tool for {family} providers.", f"tools[{i}]")
        out.append(fn)
    return out
