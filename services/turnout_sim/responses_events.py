"""The Responses API's streamed events, in the order OpenAI sends them.

Owns: the SSE events of one streamed Response, each framed as
`event: <type>\\ndata: {..., "type": <type>, "sequence_number": n}\\n\\n`:
`response.created`, `response.in_progress`, then per output item
`response.output_item.added`; for a message `response.content_part.added`,
the `response.output_text.delta` events, `response.output_text.done`,
`response.content_part.done`; for a function call the
`response.function_call_arguments.delta` events and
`response.function_call_arguments.done`; for a web search
`response.web_search_call.in_progress` / `.searching` / `.completed`; then
`response.output_item.done`; finally `response.completed` (or
`response.incomplete` when `max_output_tokens` cut the text) carrying the
full Response. A response that fails after it was accepted (`bodyerr`)
sends `response.failed` after `response.in_progress`.
Must not import: aiohttp or any I/O; pure functions of their arguments.
Sources: https://platform.openai.com/docs/api-reference/responses-streaming,
the `openai` SDK's `ResponseStreamEvent` union (openai/types/responses).
"""

from __future__ import annotations

import json
from typing import Any

from turnout_sim import tool_calls
from turnout_sim.responses_wire import ResponsesRequest, final_status, output_items, response, text_pieces

MALFORMED_EVENT = b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", \n\n'
"""An event whose data is truncated JSON (`badchunk`)."""


def frame(event: dict[str, Any]) -> bytes:
    """One named SSE event: `event: <type>\\ndata: <compact json>\\n\\n`."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


def _item_events(req: ResponsesRequest, item: dict[str, Any], index: int) -> list[tuple[dict[str, Any], bool]]:
    """One output item's events (without sequence numbers), each with whether it carries content."""
    where = {"item_id": item["id"], "output_index": index}
    events: list[tuple[dict[str, Any], bool]] = []
    if item["type"] == "message":
        part = item["content"][0]
        opened = {**item, "status": "in_progress", "content": []}
        empty = {**part, "text": ""}
        events.append(({"type": "response.output_item.added", "output_index": index, "item": opened}, False))
        events.append(({"type": "response.content_part.added", **where, "content_index": 0, "part": empty}, False))
        for piece in text_pieces(req):
            delta = {"type": "response.output_text.delta", **where, "content_index": 0, "delta": piece}
            events.append(({**delta, "logprobs": []}, True))
        done = {"type": "response.output_text.done", **where, "content_index": 0, "text": part["text"]}
        events.append(({**done, "logprobs": []}, False))
        events.append(({"type": "response.content_part.done", **where, "content_index": 0, "part": part}, False))
    elif item["type"] == "function_call":
        opened = {**item, "status": "in_progress", "arguments": ""}
        events.append(({"type": "response.output_item.added", "output_index": index, "item": opened}, False))
        for piece in tool_calls.fragments(item["arguments"]):
            events.append(({"type": "response.function_call_arguments.delta", **where, "delta": piece}, True))
        done = {"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]}
        events.append(({**done, "name": item["name"]}, False))
    else:  # web_search_call
        opened = {**item, "status": "in_progress"}
        events.append(({"type": "response.output_item.added", "output_index": index, "item": opened}, False))
        for stage in ("in_progress", "searching", "completed"):
            events.append(({"type": f"response.web_search_call.{stage}", **where}, False))
    events.append(({"type": "response.output_item.done", "output_index": index, "item": item}, False))
    return events


def _numbered(events: list[tuple[dict[str, Any], bool]]) -> list[tuple[dict[str, Any], bool]]:
    return [({**event, "sequence_number": n}, content) for n, (event, content) in enumerate(events)]


def stream_events(req: ResponsesRequest, *, token: str, created_s: int) -> list[tuple[dict[str, Any], bool]]:
    """Every event of the streamed Response, numbered from 0, each with
    whether it carries content (the `*.delta` events, counted by `cut<N>`
    and the like); the last one is `response.completed` /
    `response.incomplete`."""
    items = output_items(req, token)
    start = response(req, token=token, created_s=created_s, status="in_progress", output=[])
    events = [({"type": "response.created", "response": start}, False)]
    events.append(({"type": "response.in_progress", "response": start}, False))
    for index, item in enumerate(items):
        events += _item_events(req, item, index)
    status = final_status(req)
    final = response(req, token=token, created_s=created_s, status=status, output=items)
    events.append(({"type": f"response.{status}", "response": final}, False))
    return _numbered(events)


def failed_events(req: ResponsesRequest, *, token: str, created_s: int, error: dict[str, str]) -> list[bytes]:
    """The stream of a response that fails after it was accepted:
    `response.created`, `response.in_progress`, `response.failed`."""
    start = response(req, token=token, created_s=created_s, status="in_progress", output=[])
    failed = response(req, token=token, created_s=created_s, status="failed", output=[], error=error)
    events = [
        ({"type": "response.created", "response": start}, False),
        ({"type": "response.in_progress", "response": start}, False),
        ({"type": "response.failed", "response": failed}, False),
    ]
    return [frame(event) for event, _ in _numbered(events)]
