"""Tool calls the simulated model makes, the same on every wire.

Owns: the rule deciding whether an answer is a tool call, a quote of a tool
result or plain text, and the deterministic arguments of a call, as pure
functions over each wire's request fields:

- a request carrying tools whose `tool_choice` is not `none`, and whose last
  message is not a tool result, is answered with a call to the tool that
  `tool_choice` names, else to the first tool;
- a request whose last message is a tool result (OpenAI chat: role `tool`;
  Anthropic: a user message with a `tool_result` block; Responses: a
  `function_call_output` item) is answered with text quoting that result:
  `Tool result: <content>`;
- a call's arguments come from the tool's JSON schema `properties` (every
  property, so the required ones too): a string gets `"sim"`, an integer 1,
  a number 1.5, a boolean true, an array [], an object {}, null None, an
  `enum` its first value, a `const` its value; a name listed in `required`
  without a property gets `"sim"`. A schema without properties (a free-form
  object) gets `{"answer": "<the answer text>"}`, the text the request
  would otherwise get.
Sources: https://platform.openai.com/docs/guides/function-calling,
https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use.
Must not import: aiohttp or any wire module; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

QUOTE_PREFIX = "Tool result:"
"""The words the answer after a tool result starts with."""
ARGUMENT_FRAGMENTS = 4
"""How many pieces a streamed call's arguments are sent in (fewer when short)."""

_BY_TYPE: dict[str, object] = {
    "string": "sim",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A call the answer makes.

    Attributes:
        name: the tool's name.
        arguments: the call's arguments, or None for a free-form schema
            (then `{"answer": <answer text>}`, see `arguments_json`).
    """

    name: str
    arguments: dict[str, Any] | None


def value_for(schema: object) -> object:
    """The deterministic value of one property schema (see the module doc).

    Args:
        schema: a JSON schema (dict); anything else gets `"sim"`.
    """
    if not isinstance(schema, Mapping):
        return "sim"
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return object_for(schema) or {}
    return _BY_TYPE.get(kind, "sim") if isinstance(kind, str) else "sim"


def object_for(schema: object) -> dict[str, Any] | None:
    """The arguments built from an object schema's `properties` and `required`.

    Args:
        schema: a tool's parameters / input schema.

    Returns:
        One entry per property (and per required name without a property),
        in schema order; None when the schema names no property at all.
    """
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    required = schema.get("required")
    built: dict[str, Any] = {}
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            built[str(name)] = value_for(prop)
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in built:
                built[name] = "sim"
    return built or None


def arguments_json(call: ToolCall, answer_text: str) -> str:
    """The call's arguments as the JSON text the wire carries (compact).

    Args:
        call: the call.
        answer_text: the text the request would otherwise get (for a
            free-form schema's `{"answer": ...}`).
    """
    arguments = {"answer": answer_text} if call.arguments is None else call.arguments
    return json.dumps(arguments, separators=(", ", ": "))


def fragments(text: str, parts: int = ARGUMENT_FRAGMENTS) -> list[str]:
    """`text` in up to `parts` consecutive non-empty pieces that join back to it.

    Args:
        text: the text to split (JSON arguments).
        parts: how many pieces at most (>= 1).

    Returns:
        The pieces; [] for empty text.
    """
    if not text:
        return []
    size = -(-len(text) // max(1, parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def quote_words(result: str) -> list[str]:
    """The answer after a tool result, one piece per word: `Tool result:`,
    then each word of `result` with its leading space (`" 22C"`)."""
    words = [*QUOTE_PREFIX.split(), *result.split()]
    return [word if i == 0 else f" {word}" for i, word in enumerate(words)]


def choose(tools: Sequence[tuple[str, object]], chosen: str | None) -> ToolCall | None:
    """The call to make among `tools` ((name, schema) pairs, in request order).

    Args:
        tools: the request's callable tools.
        chosen: the name `tool_choice` forces, or None for the first tool.

    Returns:
        The call (the named tool when present, else the first), or None
        when there are no tools.
    """
    if not tools:
        return None
    by_name = dict(tools)
    name = chosen if chosen is not None and chosen in by_name else tools[0][0]
    return ToolCall(name=name, arguments=object_for(by_name[name]))


def content_text(content: object) -> str:
    """The text of a tool result's content: a string, or the `text` of each
    part of a list of parts (`{"type": "text", "text": ...}` and the like),
    joined by spaces; anything else gives ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return " ".join(t for t in texts if isinstance(t, str))
    return ""


def chat_tools(body: Mapping[str, Any]) -> list[tuple[str, object]]:
    """An OpenAI chat request's function tools as (name, parameters) pairs.

    `tools: [{"type": "function", "function": {"name", "parameters"}}]`;
    entries of any other shape are skipped.
    """
    tools = body.get("tools")
    found: list[tuple[str, object]] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            found.append((function["name"], function.get("parameters")))
    return found


def chat_decision(body: Mapping[str, Any]) -> tuple[ToolCall | None, str | None]:
    """What an OpenAI chat request's answer is: (call, None), (None, quoted
    tool result) or (None, None) for text.

    `tool_choice`: `"none"` never calls; `{"type": "function", "function":
    {"name": X}}` calls X; `"auto"`, `"required"` or absent call the first
    tool. Source: https://platform.openai.com/docs/api-reference/chat/create.
    """
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, Mapping) and last.get("role") == "tool":
        return None, content_text(last.get("content"))
    choice = body.get("tool_choice")
    if choice == "none":
        return None, None
    named = choice.get("function") if isinstance(choice, Mapping) else None
    chosen = named.get("name") if isinstance(named, Mapping) else None
    return choose(chat_tools(body), chosen if isinstance(chosen, str) else None), None


def messages_decision(body: Mapping[str, Any]) -> tuple[ToolCall | None, str | None]:
    """The same decision for an Anthropic Messages request.

    Tools: `[{"name", "input_schema"}]`; `tool_choice` `{"type": "none"}`
    never calls, `{"type": "tool", "name": X}` calls X, `auto` / `any` or
    absent call the first tool. A last user message with a `tool_result`
    block is quoted. Source: https://docs.anthropic.com/en/api/messages.
    """
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, Mapping) else None
    if isinstance(last, Mapping) and last.get("role") == "user" and isinstance(content, list):
        results = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        if results:
            return None, " ".join(content_text(r.get("content")) for r in results)
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "none":
        return None, None
    tools = body.get("tools")
    pairs = [
        (t["name"], t.get("input_schema"))
        for t in (tools if isinstance(tools, list) else [])
        if isinstance(t, Mapping) and isinstance(t.get("name"), str)
    ]
    chosen = choice.get("name") if isinstance(choice, Mapping) and choice.get("type") == "tool" else None
    return choose(pairs, chosen if isinstance(chosen, str) else None), None


def converse_decision(body: Mapping[str, Any]) -> tuple[ToolCall | None, str | None]:
    """The same decision for a Bedrock Converse request.

    Tools: `toolConfig.tools[].toolSpec{name, inputSchema{json}}`; `toolConfig.toolChoice`
    `{"tool": {"name": X}}` calls X, `auto` / `any` or absent call the first tool (Converse
    has no "none"). A last user message with a `toolResult` block is quoted (its content's
    `text` blocks). Source: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html.
    """
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, Mapping) else None
    if isinstance(last, Mapping) and last.get("role") == "user" and isinstance(content, list):
        results = [
            b["toolResult"] for b in content if isinstance(b, Mapping) and isinstance(b.get("toolResult"), Mapping)
        ]
        if results:
            return None, " ".join(content_text(r.get("content")) for r in results)
    config = body.get("toolConfig")
    config = config if isinstance(config, Mapping) else {}
    specs = [t.get("toolSpec") for t in config.get("tools") or [] if isinstance(t, Mapping)]
    pairs = [
        (s["name"], (s.get("inputSchema") or {}).get("json"))
        for s in specs
        if isinstance(s, Mapping) and isinstance(s.get("name"), str)
    ]
    choice = config.get("toolChoice")
    named = choice.get("tool") if isinstance(choice, Mapping) else None
    chosen = named.get("name") if isinstance(named, Mapping) else None
    return choose(pairs, chosen if isinstance(chosen, str) else None), None
