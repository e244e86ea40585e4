"""OpenAI Responses tools, tool choice and text format -> their chat counterparts (pure).

Owns: `translate_tools`, `translate_tool_choice`, `translate_format` and the 400 they raise
(`invalid`). Used by `request`.
Must not import: FastAPI, starlette, Redis; no I/O.

Sources: https://platform.openai.com/docs/api-reference/responses/create (`tools`,
`tool_choice`, `text.format`) and /docs/api-reference/chat/create (`tools`, `tool_choice`,
`response_format`).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from turnout.errors import RequestRejected

TOOL_CHOICES: Final = frozenset({"auto", "none", "required"})
"""`tool_choice` strings (OpenAI reference)."""
FUNCTION_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A function tool's (and a json_schema format's) name: what both the OpenAI and the Anthropic APIs take."""

_encode = msgspec.json.Encoder()


def invalid(message: str, param: str, code: str = "invalid_request") -> RequestRejected:
    """The 400 naming `param` that every Responses check raises (`code` `invalid_request` unless given)."""
    return RequestRejected(400, message, param=param, code=code)


def shown(value: Any) -> str:
    """`value` as JSON, cut to 40 characters, for an error message."""
    return _encode.encode(value).decode()[:40]


NAMESPACE_JOIN: Final = "__"
"""Joins a `namespace` tool's name and one of its functions' names into the chat function's name
(`crm__lookup`): chat tools have no namespaces (`split_call_name` parts it again)."""


def _function(tool: Any, where: str, name: str | None = None) -> dict[str, Any]:
    """One Responses function tool as a chat tool, named `name` (default: its own).

    Raises:
        RequestRejected: 400 naming the field of a malformed function tool.
    """
    own = tool.get("name")
    if not isinstance(own, str) or not FUNCTION_NAME.fullmatch(own):
        raise invalid(f"`{where}.name` is required: 1 to 64 letters, digits, `_` or `-`.", f"{where}.name")
    function: dict[str, Any] = {"name": name or own}
    for key, kind, what in (
        ("description", str, "a string"),
        ("parameters", dict, "an object"),
        ("strict", bool, "a boolean"),
    ):
        value = tool.get(key)
        if value is None:
            continue
        if not isinstance(value, kind):
            raise invalid(f"`{where}.{key}` must be {what}.", f"{where}.{key}")
        function[key] = value
    return {"type": "function", "function": function}


def _namespace(tool: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A `namespace` tool's function tools as chat tools named `<namespace>__<name>`; its other
    tools (`custom`) have no chat form and are left out like a built-in tool.

    Raises:
        RequestRejected: 400 naming the field of a malformed namespace or of a joined name past
            64 characters.
    """
    space, inner = tool.get("name"), tool.get("tools")
    if not isinstance(space, str) or not FUNCTION_NAME.fullmatch(space):
        raise invalid(f"`{where}.name` is required: 1 to 64 letters, digits, `_` or `-`.", f"{where}.name")
    if not isinstance(inner, list):
        raise invalid(f"`{where}.tools` must be an array of tools.", f"{where}.tools")
    out = []
    for j, member in enumerate(inner):
        at = f"{where}.tools[{j}]"
        if not isinstance(member, dict) or member.get("type") != "function":
            continue
        joined = f"{space}{NAMESPACE_JOIN}{member.get('name')}"
        if not FUNCTION_NAME.fullmatch(joined):
            raise invalid(
                f"`{at}.name`: joined with its namespace ({shown(joined)}) it must be 1 to 64 letters, digits, "
                "`_` or `-`, as a chat function's name.",
                f"{at}.name",
            )
        out.append(_function(member, at, joined))
    return out


def translate_tools(tools: Any, choice: Any = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Responses tools as chat tools, and the types of the built-in tools left out.

    A `function` tool becomes a chat function tool (`{type, name, description, parameters,
    strict}` -> `{type: function, function: {...}}`); a `namespace` tool's functions become
    chat functions named `<namespace>__<name>` (`NAMESPACE_JOIN`). A built-in tool (`web_search`,
    `file_search`, `code_interpreter`, `mcp`, ...) has no chat form: offered with a `tool_choice`
    that does not force a tool (`auto`, `none`, absent), it is left out and the model answers
    without it (its type is returned, for the answer's `x-turnout-tools-left-out` header);
    with one that does (`required`, or naming a tool), leaving it out could change the answer,
    so it is refused (the surface sends such a request to `api: responses` offers only:
    `chat_tools_of` with `defer_builtin`).

    Raises:
        RequestRejected: 400 `unsupported_tool` naming `tools[i].type` for a built-in tool the
            request may force; 400 naming the field of a malformed tool.
    """
    if not isinstance(tools, list):
        raise invalid("`tools` must be an array.", "tools")
    forced = choice not in (None, "auto", "none")
    out: list[dict[str, Any]] = []
    left_out: list[str] = []
    seen: dict[str, int] = {}  # chat function name -> the tool it came from
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise invalid(f"`{where}` must be an object with a string `type`.", where)
        kind = tool["type"]
        if kind in ("function", "namespace"):
            added = [_function(tool, where)] if kind == "function" else _namespace(tool, where)
            for chat_tool in added:
                name = chat_tool["function"]["name"]
                if name in seen:  # a call to it would leave its tool unknown
                    raise invalid(
                        f"`{where}`: a tool named {shown(name)} is already `tools[{seen[name]}]` (a `namespace` "
                        f"tool's functions are named `<namespace>{NAMESPACE_JOIN}<name>`); give each its own name.",
                        f"{where}.name",
                    )
                seen[name] = i
            out.extend(added)
            if kind == "namespace":  # its tools of no chat form are left out like built-in ones
                inner = tool.get("tools") or []
                left_out.extend(
                    str(m.get("type")) for m in inner if isinstance(m, dict) and m.get("type") != "function"
                )
        elif forced:
            raise invalid(
                f"`{where}.type`: the built-in tool {shown(kind)} has no chat form and `tool_choice` may force "
                "a tool, so only a model's `api: responses` offers can serve it (this one has none); other "
                "offers serve `function` and `namespace` tools (a built-in tool offered with `tool_choice: auto` "
                "is left out for them).",
                f"{where}.type",
                code="unsupported_tool",
            )
        else:
            left_out.append(kind)
    return out, left_out


def check_choice_names(choice: Any, chat: dict[str, Any]) -> None:
    """A `tool_choice` that names a function names one of the request's tools, and `required`
    has a tool to require (`chat`: the translated request).

    Raises:
        RequestRejected: 400 naming `tool_choice.name` or `tool_choice`.
    """
    names = {t["function"]["name"] for t in chat.get("tools", ())}
    if choice == "required" and not names:
        raise invalid("`tool_choice: required` needs at least one function tool in `tools`.", "tool_choice")
    picked = chat.get("tool_choice")
    if isinstance(picked, dict):
        name = picked.get("function", {}).get("name")
        if name not in names:
            raise invalid(f"`tool_choice.name` {shown(name)} names no function of `tools`.", "tool_choice.name")


def split_call_name(name: str, tools: Any) -> tuple[str, str | None]:
    """A chat tool call's function name as (name, namespace): `<namespace>__<name>` of a
    `namespace` tool the request offered (`tools`, as sent) is parted again; any other name is
    the function's own (namespace None)."""
    if NAMESPACE_JOIN not in name or not isinstance(tools, list):
        return name, None
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "namespace":
            continue
        space = tool.get("name")
        prefix = f"{space}{NAMESPACE_JOIN}"
        if isinstance(space, str) and name.startswith(prefix):
            inner = name[len(prefix) :]
            members = tool.get("tools")
            if isinstance(members, list) and any(isinstance(m, dict) and m.get("name") == inner for m in members):
                return inner, space
    return name, None


def translate_tool_choice(choice: Any, tools: Any = None) -> Any:
    """A Responses `tool_choice` as the chat one (`{type: function, name}` ->
    `{type: function, function: {name}}`; with a `namespace`, the joined name `translate_tools`
    gave the function).

    Raises:
        RequestRejected: 400 naming `tool_choice` (or `tool_choice.type` for a built-in tool).
    """
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise invalid("`tool_choice.name` is required: the function to call.", "tool_choice.name")
        space = choice.get("namespace")
        joined = f"{space}{NAMESPACE_JOIN}{name}" if isinstance(space, str) and space else name
        return {"type": "function", "function": {"name": joined}}
    if isinstance(choice, dict) and isinstance(choice.get("type"), str):
        raise invalid(
            f"`tool_choice.type` {shown(choice['type'])} names a built-in tool, which only a model's "
            "`api: responses` offers can serve (this one has none); other offers take `function` only.",
            "tool_choice.type",
            code="unsupported_tool",
        )
    raise invalid('`tool_choice` must be auto, none, required or {"type": "function", "name": ...}.', "tool_choice")


def translate_format(text: Any) -> dict[str, Any] | None:
    """`text.format` as the chat `response_format` (`json_schema`: name, schema, strict,
    description; `json_object`); None for `text` or no format.

    Raises:
        RequestRejected: 400 naming `text`, `text.format.type`, `.name` or `.schema`.
    """
    if not isinstance(text, dict):
        raise invalid("`text` must be an object.", "text")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise invalid("`text.format.type` must be one of json_object, json_schema, text.", "text.format.type")
    name = fmt.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
        raise invalid("`text.format.name` is required: 1 to 64 letters, digits, `_` or `-`.", "text.format.name")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise invalid("`text.format.schema` is required: a JSON Schema object.", "text.format.schema")
    spec: dict[str, Any] = {"name": name, "schema": schema}
    for key, kind_, what in (("strict", bool, "a boolean"), ("description", str, "a string")):
        value = fmt.get(key)
        if value is not None:
            if not isinstance(value, kind_):
                raise invalid(f"`text.format.{key}` must be {what}.", f"text.format.{key}")
            spec[key] = value
    return {"type": "json_schema", "json_schema": spec}


def chat_tools_of(
    chat: dict[str, Any], tools: Any, choice: Any, *, defer_builtin: bool
) -> tuple[list[str], RequestRejected | None]:
    """Put the chat form of `tools` and `tool_choice` in `chat`; (built-in tool types left out,
    the deferred `unsupported_tool` refusal or None). With `defer_builtin`, a built-in tool that
    may be forced (or a `tool_choice` naming one) does not raise: its refusal is returned, and
    the chat form has the built-in tools left out and no `tool_choice` naming one.

    Raises:
        RequestRejected: 400 naming the field at fault.
    """
    left_out: list[str] = []
    deferred: RequestRejected | None = None
    if tools is not None:
        try:
            chat_tools, left_out = translate_tools(tools, choice)
        except RequestRejected as exc:
            if not defer_builtin or exc.code != "unsupported_tool":
                raise
            deferred = exc
            chat_tools, left_out = translate_tools(tools, "auto")  # the chat form: built-in tools left out
        if chat_tools:  # an empty array, or built-in tools only: no tools
            chat["tools"] = chat_tools
    if choice is not None:
        try:
            chat["tool_choice"] = translate_tool_choice(choice, tools)
        except RequestRejected as exc:
            if not defer_builtin or exc.code != "unsupported_tool":
                raise
            deferred = deferred or exc
            return left_out, deferred
        if deferred is None or "tools" in chat:
            check_choice_names(choice, chat)
        else:
            del chat["tool_choice"]  # `required` with built-in tools only: no chat form
    return left_out, deferred
