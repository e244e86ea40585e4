"""OpenAI Responses API wire format: request fields and the Response object.

Owns: reading `POST /v1/responses` (`model`, `input` as a string or a list
of items — `{"type": "message", role, content}` with string content or
`input_text` / `output_text` / `input_image` parts, plain `{role, content}`
messages, `function_call` and `function_call_output` items — `instructions`,
`tools`, `tool_choice`, `text.format`, `max_output_tokens`, `stream`,
`previous_response_id`, `store` and the echoed fields) with OpenAI's 400
bodies, deciding what the answer is, and building the Response object.
The event stream is `responses_events`; faults are `openai_steps`'.
Must not import: aiohttp or any I/O; pure functions of their arguments
(ids come from the caller's token).
Sources: https://platform.openai.com/docs/api-reference/responses/create,
https://platform.openai.com/docs/api-reference/responses/object.

The answer, by the first rule that applies:
- the last input item is a `function_call_output`: text quoting its output
  (`Tool result: ...`, see `tool_calls`);
- tools are given and `tool_choice` is not `none`: the tool `tool_choice`
  names (`{"type": "function", "name"}`, or a built-in tool's type), else
  the first tool. A function tool gets a `function_call` item whose
  arguments come from its `parameters` (see `tool_calls`); a built-in web
  search (`web_search`, `web_search_preview`) gets a `web_search_call` item
  then a message with the text below;
- `text.format` `json_schema`: a JSON object built from its `schema` as
  tool arguments are; `json_object`: `{"answer": "<the text>"}`;
- otherwise the deterministic text `tok0 tok1 ...` of 12 tokens (`len<N>`:
  N). A `max_output_tokens` below the answer's length cuts it: `status:
  "incomplete"`, `incomplete_details: {"reason": "max_output_tokens"}`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from turnout_sim import openai_wire, tool_calls
from turnout_sim.openai_errors import envelope
from turnout_sim.openai_wire import ChatRequest, RequestError

WEB_SEARCH_TYPES = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26"})
"""Built-in tool types answered with a `web_search_call` item."""
TEXT_FORMATS = ("text", "json_schema", "json_object")
ECHOED = ("instructions", "metadata", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls")
_DEFAULTS: dict[str, Any] = {
    "instructions": None,
    "metadata": {},
    "temperature": 1.0,
    "top_p": 1.0,
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesRequest:
    """The honoured fields of a Responses request.

    Attributes:
        model: the requested model name, echoed.
        stream: SSE wanted.
        chat: the equivalent chat request: answer text (or fixed pieces for a
            quote or JSON), its cut by `max_output_tokens`, the call's
            arguments (`chat.call`), usage.
        search: the answer starts with a `web_search_call` item.
        query: the search query (the last user text).
        echo: the fields the Response object echoes, defaults filled in.
        store: keep the response for `previous_response_id` (default true).
    """

    model: str
    stream: bool
    chat: ChatRequest
    search: bool = False
    query: str = ""
    echo: dict[str, Any]
    store: bool = True


def _invalid(message: str, param: str | None, code: str | None = None) -> RequestError:
    return RequestError(envelope(message, "invalid_request_error", code, param))


def _item_text(item: Mapping[str, Any]) -> str:
    if item.get("type") == "function_call_output":
        return tool_calls.content_text(item.get("output"))
    if item.get("type") == "function_call":
        return str(item.get("arguments", ""))
    return tool_calls.content_text(item.get("content"))


def _items(raw: object) -> list[Mapping[str, Any]]:
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise _invalid("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise _invalid(f"Invalid type for 'input[{index}]': expected an object.", f"input[{index}]", "invalid_type")
        if item.get("type", "message") == "message" and not isinstance(item.get("role"), str):
            raise _invalid(f"Missing required parameter: 'input[{index}].role'.", f"input[{index}].role")
    return raw


def _tools(body: Mapping[str, Any]) -> tuple[list[tuple[str, object]], list[str]]:
    """(function tools as (name, parameters), every tool's type or name in order)."""
    tools = body.get("tools")
    functions: list[tuple[str, object]] = []
    order: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "function" and isinstance(tool.get("name"), str):
            functions.append((tool["name"], tool.get("parameters")))
            order.append(tool["name"])
        elif tool.get("type") in WEB_SEARCH_TYPES:
            order.append(str(tool["type"]))
    return functions, order


def _decide(body: Mapping[str, Any], items: list[Mapping[str, Any]]) -> tuple[tool_calls.ToolCall | None, bool]:
    """(the function call, whether to search) per the module doc's rules."""
    choice = body.get("tool_choice")
    if (items and items[-1].get("type") == "function_call_output") or choice == "none":
        return None, False
    functions, order = _tools(body)
    if not order:
        return None, False
    wanted = order[0]
    if isinstance(choice, Mapping):
        named = choice.get("name") if choice.get("type") == "function" else choice.get("type")
        wanted = named if isinstance(named, str) and named in order else wanted
    if wanted in WEB_SEARCH_TYPES:
        return None, True
    return tool_calls.choose(functions, wanted), False


def _format_text(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    """Fixed answer pieces for `text.format` json_schema (the schema's object)
    or json_object; None for plain text.

    Raises:
        RequestError: an unknown format type, or json_schema without a schema.
    """
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind not in TEXT_FORMATS:
        raise _invalid(f"Invalid value for 'text.format.type': {kind!r}.", "text.format.type", "invalid_value")
    assert isinstance(fmt, Mapping)
    if kind == "json_schema":
        if not isinstance(fmt.get("schema"), Mapping) or not isinstance(fmt.get("name"), str):
            raise _invalid("Missing required parameter: 'text.format.schema'.", "text.format.schema")
        return tuple(tool_calls.fragments(json.dumps(tool_calls.object_for(fmt["schema"]) or {})))
    if kind == "json_object":
        words = openai_wire.tokens(openai_wire.DEFAULT_TOKENS)
        return ('{"answer": "', *words, '"}')
    return None


def parse_request(body: object, *, known: Callable[[str], bool], answer_tokens: int | None = None) -> ResponsesRequest:
    """Read the honoured fields of a decoded Responses request body.

    Args:
        body: the decoded JSON body.
        known: whether a response id is stored (for `previous_response_id`).
        answer_tokens: the model's answer length in tokens (`len<N>`), or
            None for the default 12.

    Raises:
        RequestError: OpenAI's 400 bodies: no model or input, a bad input
            item, `max_output_tokens` not a positive integer, a bad
            `text.format`, or `previous_response_id` not stored
            (`previous_response_not_found`).
    """
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    items = _items(body.get("input"))
    limit = openai_wire.int_param(body, "max_output_tokens")
    previous = body.get("previous_response_id")
    if previous is not None and not (isinstance(previous, str) and known(previous)):
        raise _invalid(
            f"Previous response with id '{previous}' not found.", "previous_response_id", "previous_response_not_found"
        )
    call, search = _decide(body, items)
    last = items[-1] if items else {}
    text = _format_text(body) if call is None else None
    if last.get("type") == "function_call_output":
        text = tuple(tool_calls.quote_words(_item_text(last)))
    instructions = body.get("instructions")
    prompt_tokens = sum(len(_item_text(i).split()) for i in items)
    prompt_tokens += len(instructions.split()) if isinstance(instructions, str) else 0
    length = answer_tokens or openai_wire.DEFAULT_TOKENS
    count = len(text) if text is not None else length
    chat = ChatRequest(
        model=model,
        stream=body.get("stream") is True,
        include_usage=False,
        completion_tokens=min(count, limit) if limit else count,
        prompt_tokens=prompt_tokens,
        limit=limit,
        cut=limit is not None and limit < count,
        call=call,
        text=text,
    )
    users = [i for i in items if i.get("role") == "user"]
    echo = {name: body.get(name, _DEFAULTS[name]) for name in ECHOED}
    echo |= {
        "max_output_tokens": limit,
        "previous_response_id": previous,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "text": body.get("text") or {"format": {"type": "text"}},
        "truncation": body.get("truncation", "disabled"),
    }
    return ResponsesRequest(
        model=model,
        stream=chat.stream,
        chat=chat,
        search=search,
        query=_item_text(users[-1]) if users else "",
        echo=echo,
        store=body.get("store") is not False,
    )


def with_answer_length(req: ResponsesRequest, answer_tokens: int) -> ResponsesRequest:
    """`req` answered by a model whose text answer is `answer_tokens` long
    (`len<N>`), cut by `max_output_tokens` when that is smaller."""
    if req.chat.text is not None:
        return req
    return replace(req, chat=openai_wire.with_answer_length(req.chat, answer_tokens))


def text_pieces(req: ResponsesRequest) -> list[str]:
    """The message's text, one piece per streamed delta."""
    return openai_wire.answer_pieces(req.chat)


def usage(req: ResponsesRequest) -> dict[str, Any]:
    """The Response's `usage` (no cached or reasoning tokens)."""
    produced = openai_wire.produced_tokens(req.chat)
    return {
        "input_tokens": req.chat.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": produced,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": req.chat.prompt_tokens + produced,
    }


def output_items(req: ResponsesRequest, token: str) -> list[dict[str, Any]]:
    """The Response's `output` items, complete, ids made from `token`."""
    if req.chat.call is not None:
        arguments = openai_wire.call_arguments(req.chat)
        call = {"id": f"fc_{token}", "call_id": f"call_{token}", "name": req.chat.call.name}
        return [{"type": "function_call", **call, "arguments": arguments, "status": "completed"}]
    items: list[dict[str, Any]] = []
    if req.search:
        action = {"type": "search", "query": req.query or "sim"}
        items.append({"type": "web_search_call", "id": f"ws_{token}", "status": "completed", "action": action})
    part = {"type": "output_text", "text": "".join(text_pieces(req)), "annotations": [], "logprobs": []}
    status = "incomplete" if req.chat.cut else "completed"
    items.append({"type": "message", "id": f"msg_{token}", "status": status, "role": "assistant", "content": [part]})
    return items


def response(
    req: ResponsesRequest,
    *,
    token: str,
    created_s: int,
    status: str,
    output: list[dict[str, Any]],
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The Response object.

    Args:
        req: the request.
        token: the id token (`resp_<token>`).
        created_s: `created_at`, integer epoch seconds.
        status: `in_progress`, `completed`, `incomplete` or `failed`.
        output: the output items so far.
        error: `{"code", "message"}` for a failed response, else None.
    """
    cut = status == "incomplete"
    return {
        "id": f"resp_{token}",
        "object": "response",
        "created_at": created_s,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "model": req.model,
        "output": output,
        "usage": usage(req) if status in ("completed", "incomplete") else None,
        "store": req.store,
        "user": None,
        **req.echo,
    }


def final_status(req: ResponsesRequest) -> str:
    """`incomplete` when `max_output_tokens` cut the text, else `completed`."""
    return "incomplete" if req.chat.cut and req.chat.call is None else "completed"


def failed_error(rate_limited: bool) -> dict[str, str]:
    """The `error` of a response that failed after it was accepted (`bodyerr`)."""
    if rate_limited:
        return {"code": "rate_limit_exceeded", "message": "Rate limit reached while generating the response."}
    return {"code": "server_error", "message": "The server had an error while processing your request."}
