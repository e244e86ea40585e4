"""OpenAI chat success answers: `chat.completion` objects and the chunk stream.

Owns: the JSON of a chat answer — each choice's message (text, or a
`tool_calls` list), its `logprobs`, `finish_reason` and the `usage` — and the
frames of its stream: per choice a role chunk (with the tool call's id and
name for a call), the content chunks round-robin (text pieces, or argument
fragments as `delta.tool_calls[0].function.arguments`), each choice's finish
chunk, the usage chunk and `data: [DONE]`.
Must not import: aiohttp or any I/O; pure functions of their arguments.
Sources: https://platform.openai.com/docs/api-reference/chat/object,
https://platform.openai.com/docs/api-reference/chat-streaming,
https://platform.openai.com/docs/guides/function-calling (streaming).

Logprobs (`logprobs: true`): each content piece is one token; token i's
logprob is `-(1 + i % 5) / 10`, its `bytes` the UTF-8 bytes of the piece,
and `top_logprobs` lists the token itself first, then `alt1`, `alt2`, ...
each 1.0 less likely (logprob one lower) than the one before. A tool call
carries no content and so `logprobs: null`.
"""

from __future__ import annotations

from typing import Any

from turnout_sim import openai_wire as wire
from turnout_sim.openai_wire import ChatRequest

CALL_ID_PREFIX = "call_sim"
"""Tool call ids are `call_sim<completion number>_<choice>`."""


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def token_logprob(index: int) -> float:
    """The logprob of token `index` (0-based) of any answer: -0.1 .. -0.5."""
    return -(1 + index % 5) / 10


def logprobs_of(req: ChatRequest, pieces: list[str], first_index: int = 0) -> dict[str, Any] | None:
    """A choice's `logprobs` object for content `pieces`, or None when not asked.

    Args:
        req: the request (its `logprobs` and `top_logprobs`).
        pieces: the content tokens covered.
        first_index: the 0-based position of `pieces[0]` in the answer
            (a stream chunk covers one token).
    """
    if not req.logprobs or req.call is not None:
        return None
    content = []
    for offset, piece in enumerate(pieces):
        logprob = token_logprob(first_index + offset)
        top = [_entry(piece, logprob)] + [_entry(f"alt{k}", logprob - k) for k in range(1, req.top_logprobs)]
        content.append({**_entry(piece, logprob), "top_logprobs": top[: req.top_logprobs]})
    return {"content": content, "refusal": None}


def call_id(completion_id: str, choice: int) -> str:
    """The id of choice `choice`'s tool call in completion `completion_id`."""
    return f"{CALL_ID_PREFIX}{completion_id.rpartition('-')[2]}_{choice}"


def _message(req: ChatRequest, completion_id: str, choice: int) -> dict[str, Any]:
    if req.call is None:
        return {"role": "assistant", "content": "".join(wire.answer_pieces(req, choice)), "refusal": None}
    call = {
        "id": call_id(completion_id, choice),
        "type": "function",
        "function": {"name": req.call.name, "arguments": wire.call_arguments(req, choice)},
    }
    return {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}


def completion(req: ChatRequest, *, completion_id: str, created_s: int) -> dict[str, Any]:
    """A full non-streaming `chat.completion` object (continues a prefill).

    Args:
        req: the request being answered.
        completion_id: `chatcmpl-...` id.
        created_s: creation time, integer epoch seconds.

    Returns:
        The object, with `req.n` choices (index 0..n-1), each with its own
        message (text or `tool_calls`), `logprobs` and `finish_reason`
        (`wire.finish_reason(req)`).
    """
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created_s,
        "model": req.model,
        "choices": [
            {
                "index": choice,
                "message": _message(req, completion_id, choice),
                "logprobs": logprobs_of(req, wire.answer_pieces(req, choice)),
                "finish_reason": wire.finish_reason(req),
            }
            for choice in range(req.n)
        ],
        "usage": wire.usage(req),
        "system_fingerprint": "fp_sim",
    }


def chunk(
    req: ChatRequest,
    *,
    completion_id: str,
    created_s: int,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    final_usage: bool = False,
    choice: int = 0,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk` object.

    Args:
        req: the request being answered.
        completion_id: same id for every chunk of one stream.
        created_s: creation time, integer epoch seconds.
        delta: the choice's delta (`{"role": "assistant", "content": ""}`,
            `{"content": " tok3"}`, `{}` with the finish reason).
        finish_reason: None while streaming, `"stop"`, `"length"` or
            `"tool_calls"` on the choice's last chunk.
        final_usage: build the trailing usage chunk (`choices: []`).
        choice: the choice's index (0..n-1).
        logprobs: the chunk's `logprobs` (its token's), or None.
    """
    obj: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created_s,
        "model": req.model,
        "system_fingerprint": "fp_sim",
        "choices": []
        if final_usage
        else [
            {
                "index": choice,
                "delta": delta or {},
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
        ],
    }
    if req.include_usage:
        obj["usage"] = wire.usage(req) if final_usage else None
    return obj


def role_delta(req: ChatRequest, completion_id: str, choice: int) -> dict[str, Any]:
    """A choice's first delta: the role, plus the tool call's id and name."""
    if req.call is None:
        return {"role": "assistant", "content": "", "refusal": None}
    head = {
        "index": 0,
        "id": call_id(completion_id, choice),
        "type": "function",
        "function": {"name": req.call.name, "arguments": ""},
    }
    return {"role": "assistant", "content": None, "refusal": None, "tool_calls": [head]}


def content_delta(req: ChatRequest, piece: str) -> dict[str, Any]:
    """A content chunk's delta: a text piece, or an argument fragment."""
    if req.call is None:
        return {"content": piece}
    return {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}


def stream_chunks(req: ChatRequest, *, completion_id: str, created_s: int) -> list[tuple[dict[str, Any], bool]]:
    """Every chunk of the streamed answer, in order, each with whether it
    carries content (counted by `cut<N>` and the like): role chunks, the
    content round-robin (`wire.stream_pieces`), finish chunks, and the usage
    chunk when `stream_options.include_usage` asked for it."""

    def build(**fields: Any) -> dict[str, Any]:
        return chunk(req, completion_id=completion_id, created_s=created_s, **fields)

    out = [(build(delta=role_delta(req, completion_id, c), choice=c), False) for c in range(req.n)]
    positions = [0] * req.n
    for choice, piece in wire.stream_pieces(req):
        logprobs = logprobs_of(req, [piece], positions[choice])
        positions[choice] += 1
        out.append((build(delta=content_delta(req, piece), choice=choice, logprobs=logprobs), True))
    out += [(build(delta={}, finish_reason=wire.finish_reason(req), choice=c), False) for c in range(req.n)]
    if req.include_usage:
        out.append((build(final_usage=True), False))
    return out
