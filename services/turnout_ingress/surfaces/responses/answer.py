"""The fleet's `chat.completion` -> an OpenAI Response object (pure).

Owns: the Response object (`response_object`), its ids (`response_id`, `with_ids`), its
output items, status and usage as OpenAI documents them, and the chat messages its
output adds to a stored conversation (`output_messages`).
Must not import: FastAPI, starlette, Redis; no I/O, no clock (`created_at` is passed in).

Sources: https://platform.openai.com/docs/api-reference/responses/object and the
`openai` SDK's `openai/types/responses/response.py` (fields, item shapes, usage).

Decisions:
- ids are Turnout's own, derived from the gateway's request id: `resp_<request id>`, the
  message item `msg_<request id>`, function calls `fc_<request id>_<n>`, input items
  `<kind>_<request id>_<n>`; a follow-up names the response by it.
- `finish_reason` `length` -> `status: incomplete`, `incomplete_details.reason:
  max_output_tokens`; `content_filter` -> `incomplete`, reason `content_filter`; any other
  -> `completed`. The message item of an incomplete response is `incomplete` too.
- A refusal becomes a `refusal` part; `output_text` (a convenience the SDK computes) is not sent.
"""

from __future__ import annotations

from typing import Any, Final

from turnout_ingress.surfaces.responses.tools import NAMESPACE_JOIN, split_call_name

INCOMPLETE: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""`finish_reason` -> `incomplete_details.reason` (other reasons: completed)."""
_ITEM_PREFIX: Final = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}


def obj(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a field of an answer read leniently)."""
    return value if isinstance(value, dict) else {}


def response_id(request_id: str) -> str:
    """The Response id of the request `request_id` (`resp_<request id>`)."""
    return request_id if request_id.startswith("resp_") else f"resp_{request_id}"


def request_id_of(resp_id: str) -> str:
    """The request id a Response id was derived from (`response_id`'s inverse)."""
    return resp_id.removeprefix("resp_")


def with_ids(items: list[dict[str, Any]], request_id: str) -> list[dict[str, Any]]:
    """`items` (input items of `request`) with ids `<kind>_in_<request id>_<n>` and
    `status: completed`, as `GET /v1/responses/{id}/input_items` lists them."""
    out = []
    for n, item in enumerate(items):
        prefix = _ITEM_PREFIX.get(str(item.get("type")), "item")
        out.append({"id": f"{prefix}_in_{request_id}_{n}", **item, "status": "completed"})
    return out


def usage_of(usage: Any) -> dict[str, Any]:
    """The Response `usage` for a chat `usage` object (absent: zeros).

    `{input_tokens, input_tokens_details: {cached_tokens}, output_tokens,
    output_tokens_details: {reasoning_tokens}, total_tokens}`; tokens, never negative.
    """
    usage = usage if isinstance(usage, dict) else {}
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    input_tokens = max(0, int(usage.get("prompt_tokens") or 0))
    output_tokens = max(0, int(usage.get("completion_tokens") or 0))
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": max(0, int((prompt or {}).get("cached_tokens") or 0) if isinstance(prompt, dict) else 0)
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {
            "reasoning_tokens": max(
                0, int((completion or {}).get("reasoning_tokens") or 0) if isinstance(completion, dict) else 0
            )
        },
        "total_tokens": max(0, int(usage.get("total_tokens") or input_tokens + output_tokens)),
    }


def message_item(
    request_id: str, text: str, *, refusal: str | None = None, status: str = "completed"
) -> dict[str, Any]:
    """The assistant `message` output item holding `text` (or a `refusal` part)."""
    part: dict[str, Any] = (
        {"type": "refusal", "refusal": refusal}
        if refusal is not None
        else {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    )
    return {"id": f"msg_{request_id}", "type": "message", "status": status, "role": "assistant", "content": [part]}


def call_item(request_id: str, n: int, call_id: str, name: str, arguments: str, tools: Any = None) -> dict[str, Any]:
    """The `n`-th `function_call` output item (`call_id` is the chat tool call's id); a chat name
    joined from a `namespace` tool of the request's `tools` is parted into `name` and
    `namespace` again (`tools.split_call_name`)."""
    own, space = split_call_name(name, tools)
    item = {
        "id": f"fc_{request_id}_{n}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": own,
        "arguments": arguments,
    }
    if space is not None:
        item["namespace"] = space
    return item


def status_of(finish_reason: Any) -> tuple[str, dict[str, str] | None]:
    """`(status, incomplete_details)` for a chat `finish_reason` (module doc)."""
    reason = INCOMPLETE.get(str(finish_reason))
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def output_of(completion: dict[str, Any], request_id: str, tools: Any = None) -> tuple[list[dict[str, Any]], Any]:
    """The output items of a `chat.completion` (its first choice) and its `finish_reason`:
    a message item when it says anything or calls nothing, then one `function_call` item per
    tool call."""
    choices = completion.get("choices")
    choice = obj(choices[0]) if isinstance(choices, list) and choices else {}
    message = obj(choice.get("message"))
    finish = choice.get("finish_reason")
    status, _ = status_of(finish)
    text = _text(message.get("content"))
    refusal = message.get("refusal") if isinstance(message.get("refusal"), str) else None
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    items: list[dict[str, Any]] = []
    if text or refusal or not calls:
        items.append(message_item(request_id, text, refusal=refusal if not text else None, status=status))
    for n, call in enumerate(calls):
        fn = obj(call.get("function"))
        items.append(
            call_item(
                request_id,
                n,
                str(call.get("id") or ""),
                str(fn.get("name") or ""),
                str(fn.get("arguments") or ""),
                tools,
            )
        )
    return items, finish


def response_object(
    *,
    request_id: str,
    created_at: int,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    echo: dict[str, Any],
    usage: dict[str, Any] | None,
    incomplete_details: dict[str, str] | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Response object (OpenAI reference) with the request's `echo` fields (`request`).

    Args:
        request_id: the gateway's request id (the Response id is derived from it).
        created_at: epoch seconds the request arrived.
        model: the model that served (the requested one until known).
        status: `in_progress`, `completed`, `incomplete` or `failed`.
        usage: the Response usage (`usage_of`), None while streaming.
    """
    return {
        "id": response_id(request_id),
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": error,
        "incomplete_details": incomplete_details,
        "model": model,
        "output": output,
        **echo,
        "usage": usage,
    }


def to_response(
    completion: dict[str, Any], *, request_id: str, created_at: int, echo: dict[str, Any], model: str
) -> dict[str, Any]:
    """The Response object for the fleet's `chat.completion` (`model`: the requested one, used
    when the completion names none)."""
    output, finish = output_of(completion, request_id, echo.get("tools"))
    status, details = status_of(finish)
    return response_object(
        request_id=request_id,
        created_at=created_at,
        model=str(completion.get("model") or model),
        status=status,
        output=output,
        echo=echo,
        usage=usage_of(completion.get("usage")),
        incomplete_details=details,
    )


def _joined(item: dict[str, Any]) -> Any:
    """A `function_call` item's chat function name: `<namespace>__<name>` when it has a namespace."""
    space = item.get("namespace")
    return f"{space}{NAMESPACE_JOIN}{item.get('name')}" if space else item.get("name")


def output_messages(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat messages a Response's `output` adds to its conversation: one assistant message
    with its text and tool calls (none for an empty output)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                texts.append(str(part.get("text") or part.get("refusal") or ""))
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": _joined(item), "arguments": item.get("arguments")},
                }
            )
    if not texts and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return [message]
