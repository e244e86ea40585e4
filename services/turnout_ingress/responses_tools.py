"""OpenAI Responses tools, tool choice and text format -> their chat counterparts (pure).

Owns: `translate_tools`, `translate_tool_choice`, `translate_format` and the 400 they raise
(`invalid`). Used by `responses_request`.
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


def translate_tools(tools: Any) -> list[dict[str, Any]]:
    """Responses function tools as chat tools (`{type, name, description, parameters, strict}` ->
    `{type: function, function: {...}}`).

    Raises:
        RequestRejected: 400 `unsupported_tool` naming `tools[i].type` for a built-in tool;
            400 naming the field of a malformed function tool.
    """
    if not isinstance(tools, list):
        raise invalid("`tools` must be an array.", "tools")
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise invalid(f"`{where}` must be an object with a string `type`.", where)
        if tool["type"] != "function":
            raise invalid(
                f"`{where}.type`: the built-in tool {shown(tool['type'])} is not served by this gateway "
                "(no native Responses upstream is wired); only `function` tools are.",
                f"{where}.type",
                code="unsupported_tool",
            )
        name = tool.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            raise invalid(f"`{where}.name` is required: 1 to 64 letters, digits, `_` or `-`.", f"{where}.name")
        function: dict[str, Any] = {"name": name}
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
        out.append({"type": "function", "function": function})
    return out


def translate_tool_choice(choice: Any) -> Any:
    """A Responses `tool_choice` as the chat one (`{type: function, name}` ->
    `{type: function, function: {name}}`).

    Raises:
        RequestRejected: 400 naming `tool_choice` (or `tool_choice.type` for a built-in tool).
    """
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise invalid("`tool_choice.name` is required: the function to call.", "tool_choice.name")
        return {"type": "function", "function": {"name": name}}
    if isinstance(choice, dict) and isinstance(choice.get("type"), str):
        raise invalid(
            f"`tool_choice.type` {shown(choice['type'])} is not served by this gateway (only `function`).",
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
