"""The client's field for a canonical one: an error about the chat request a Responses request became,
told in the Responses request's words.

Owns: `MessageSource` (which `input` items made each chat message of a turn,
`request.translate_input`) and `client_error`, which rewrites a 400's `param` and the paths
in its `message` from the canonical chat request (`messages[3].tool_calls[1].function.arguments`, as an
adapter names them, `turnout.adapters.anthropic_wire`) to the client's (`input[2].arguments`). The
canonical messages are the `instructions` (when given), the stored conversation of
`previous_response_id`, then this turn's input; a path into the first is `instructions`, into the
second `previous_response_id` (the client did not send those turns), into the third the `input` item.
Pure.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple


class MessageSource(NamedTuple):
    """The `input` items one chat message of a turn came from.

    Attributes:
        item: the index of the item that made the message (a `message`, a `function_call` opening an
            assistant turn, a `function_call_output`).
        calls: the indices of the `function_call` items of its `tool_calls`, in order.
    """

    item: int
    calls: tuple[int, ...] = ()


_PATH = re.compile(
    r"(?<![\w.\[])messages(?:\[(\d+)\](?:\.tool_calls\[(\d+)\](\.function\.arguments)?|(\.content(?:\[\d+\])?))?)?"
)
"""A canonical path: `messages`, `messages[k]`, `messages[k].tool_calls[j]` (`.function.arguments`),
`messages[k].content` (`[n]`); what follows a matched prefix is left as it is."""


def client_path(path: str, *, instructions: bool, history: int, sources: Sequence[MessageSource]) -> str | None:
    """The client's field for the canonical path `path` (`_PATH`), or None when `path` is not one or
    names a message this turn does not have.

    Args:
        instructions: whether the canonical messages start with the `instructions`' system message.
        history: how many messages of the stored conversation follow it.
        sources: this turn's messages' sources (`MessageSource`), in order.
    """
    match = _PATH.fullmatch(path)
    return None if match is None else _mapped(match, instructions, history, sources)


def _mapped(match: re.Match[str], instructions: bool, history: int, sources: Sequence[MessageSource]) -> str | None:
    index, call, arguments, content = match.groups()
    if index is None:
        return "input"
    k = int(index) - int(instructions)
    if k < 0:
        return "instructions"
    if k < history:
        return "previous_response_id"
    if k - history >= len(sources):
        return None
    source = sources[k - history]
    if call is None:
        return f"input[{source.item}]{content or ''}"
    j = int(call)
    if j >= len(source.calls):
        return f"input[{source.item}]"
    return f"input[{source.calls[j]}]" + (".arguments" if arguments else "")


def client_error(
    error: dict[str, Any], *, instructions: bool, history: int, sources: Sequence[MessageSource]
) -> dict[str, Any]:
    """`error` (an OpenAI error object) with its `param` and the canonical paths in its `message`
    told as the client's fields (`client_path`); unchanged when its `param` is not a canonical path.
    The `param` becomes the longest path the message names under it (`…function.arguments` for a
    `tool_calls[j]` param), so it names the client's field itself."""
    param = error.get("param")
    if param == "response_format":  # the Response's `text.format` became the chat request's `response_format`
        text = error.get("message")
        said = text.replace("`response_format`", "`text.format`") if isinstance(text, str) else text
        return {**error, "param": "text.format", "message": said}
    if not isinstance(param, str) or _PATH.fullmatch(param) is None:
        return error
    message = error.get("message")
    named = [m for m in _PATH.finditer(message)] if isinstance(message, str) else []
    longest = max((m.group(0) for m in named if m.group(0).startswith(param)), key=len, default=param)
    mapped = client_path(longest, instructions=instructions, history=history, sources=sources)
    if mapped is None:
        return error

    def told(match: re.Match[str]) -> str:
        return _mapped(match, instructions, history, sources) or match.group(0)

    rewritten = _PATH.sub(told, message) if isinstance(message, str) else message
    return {**error, "param": mapped, "message": rewritten}
