"""Amazon Bedrock Converse wire format for the simulator: request fields, answers, events, errors.

Owns: reading the fields the simulator honours of a Converse / ConverseStream request
(`messages` — required, starting with a user turn, roles alternating, as Bedrock checks —
`system`, `inferenceConfig.maxTokens`, `toolConfig`), the Converse answer
(`output.message.content`, `stopReason`, `usage`, `metrics`), the stream's events
(`messageStart`, `contentBlockStart` for a tool use, `contentBlockDelta`, `contentBlockStop`,
`messageStop`, `metadata`; payloads padded with `p` as AWS pads them) and the errors AWS
sends: `x-amzn-ErrorType: <Type>:http://internal.amazon.com/coral/com.amazon.bedrock/` with a
`{"message": ...}` body (`ERRORS`: `ThrottlingException` 429, `ServiceUnavailableException`
503, `InternalServerException` 500, `ModelTimeoutException` 408, `ValidationException` 400,
`AccessDeniedException` 403, `ResourceNotFoundException` 404, ...).
Must not import: aiohttp or any I/O; pure functions of their arguments.

The answer is the OpenAI side's deterministic text (`tok0 tok1 ...`, N = `maxTokens` capped
at 4096, else 12) computed by `openai_wire`; a request with tools gets one `toolUse` block
(see `tool_calls.converse_decision`) and `stopReason: tool_use`, streamed as `toolUse.input`
fragments; a last `toolResult` is quoted. Guardrail steps answer the guardrail's blocked
message (`GUARDRAIL_TEXT`) with `stopReason: guardrail_intervened` (or `content_filtered`).
Sources: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
.../API_runtime_ConverseStream.html, .../CommonErrors.html.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from typing import Any

from turnout_sim import openai_wire, tool_calls
from turnout_sim.anthropic_wire import chat_of, pieces
from turnout_sim.tool_calls import ToolCall

ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
"""The part of `x-amzn-ErrorType` after the type, as Bedrock sends it."""
ERRORS: dict[int, tuple[int, str, str]] = {
    400: (400, "ValidationException", "Malformed input request, please reformat your input and try again."),
    401: (403, "UnrecognizedClientException", "The security token included in the request is invalid."),
    403: (403, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
    404: (
        404,
        "ResourceNotFoundException",
        "Could not resolve the foundation model from the provided model identifier.",
    ),
    408: (408, "ModelTimeoutException", "Model has timed out in processing the request. Try your request again."),
    413: (400, "ValidationException", "Input is too long for requested model."),
    422: (400, "ValidationException", "Malformed input request, please reformat your input and try again."),
    429: (429, "ThrottlingException", "Too many requests, please wait before trying again."),
    500: (
        500,
        "InternalServerException",
        "The system encountered an unexpected error during processing. Try your request again.",
    ),
    502: (
        500,
        "InternalServerException",
        "The system encountered an unexpected error during processing. Try your request again.",
    ),
    503: (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
    504: (408, "ModelTimeoutException", "Model has timed out in processing the request. Try your request again."),
    529: (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
}
"""A bare status step -> (the status AWS sends, its error type, its message); other statuses:
`InternalServerException` with the step's status."""
CONTEXT_MESSAGE = "Input is too long for requested model."
QUOTA_MESSAGE = "Your request exceeds the service quota for your account. You can view your quotas at https://console.aws.amazon.com/servicequotas/."
NOT_READY_MESSAGE = (
    "Model is not ready to serve inference requests. The AWS SDK will automatically retry the operation up to 5 times."
)
GUARDRAIL_TEXT = "Sorry, the model cannot answer this question."
"""The blocked message a guardrail answers in place of the model's."""
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
"""The `p` field AWS pads stream payloads with (its length varies; a fixed one here)."""


@dataclass(frozen=True, slots=True)
class AwsError:
    """An error answer: status, AWS's error type (`x-amzn-ErrorType`) and message."""

    status: int
    error_type: str
    message: str

    def headers(self) -> dict[str, str]:
        """`x-amzn-ErrorType` as Bedrock sends it."""
        return {"x-amzn-ErrorType": f"{self.error_type}:{ERROR_NAMESPACE}"}

    def body(self) -> dict[str, str]:
        """`{"message": ...}`."""
        return {"message": self.message}


def status_error(status: int) -> AwsError:
    """The error of a bare status step (`ERRORS`)."""
    sent, etype, message = ERRORS.get(status, (status, "InternalServerException", ERRORS[500][2]))
    return AwsError(sent, etype, message)


class RequestError(ValueError):
    """The request is unusable; `error` is the 400 `ValidationException` to send."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.error = AwsError(400, "ValidationException", message)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConverseRequest:
    """The honoured fields of a Converse request.

    Attributes:
        model: the path's model id (decoded).
        stream: asked on `/converse-stream`.
        chat: the equivalent OpenAI-side request (answer text, usage, a quoted tool result).
        call: the tool call the answer makes, else None.
    """

    model: str
    stream: bool
    chat: openai_wire.ChatRequest
    call: ToolCall | None = None


def _texts(blocks: Any) -> list[str]:
    return (
        [str(b["text"]) for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
        if isinstance(blocks, list)
        else []
    )


def _check_turns(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise RequestError(
            "1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null"
        )
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    for i, (message, role) in enumerate(zip(messages, roles, strict=True)):
        if role not in ("user", "assistant"):
            raise RequestError(
                f"1 validation error detected: Value '{role}' at 'messages.{i + 1}.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]"
            )
        if not isinstance(message.get("content"), list) or not message["content"]:
            raise RequestError(
                f"The content field in the Message object at messages.{i} is empty. Add a ContentBlock object to the content field and try again."
            )
    if roles[0] != "user":
        raise RequestError(
            "A conversation must start with a user message. Try again with a conversation that starts with a user message."
        )
    if any(a == b for a, b in itertools.pairwise(roles)):
        raise RequestError(
            "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
        )
    return messages


def parse_request(model: str, body: object, *, stream: bool) -> ConverseRequest:
    """Read the honoured fields of a decoded Converse request body.

    Raises:
        RequestError: not an object, `messages` missing, empty, not starting with a user turn
            or not alternating, or `inferenceConfig.maxTokens` not a positive integer.
    """
    if not isinstance(body, dict):
        raise RequestError("Malformed input request, please reformat your input and try again.")
    messages = _check_turns(body.get("messages"))
    config = body.get("inferenceConfig")
    limit = config.get("maxTokens") if isinstance(config, dict) else None
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise RequestError(
            "1 validation error detected: Value at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1"
        )
    texts = [t for m in messages for t in _texts(m.get("content"))] + _texts(body.get("system"))
    count = min(limit, openai_wire.MAX_TOKENS_CAP) if limit else openai_wire.DEFAULT_TOKENS
    call, result = tool_calls.converse_decision(body)
    text = None if result is None else tuple(tool_calls.quote_words(result))
    last = messages[-1]
    prefill = "".join(_texts(last.get("content"))) if last.get("role") == "assistant" else None
    if text is not None:
        count, prefill = (min(len(text), count) if limit else len(text)), None
    chat = chat_of(model, stream, count=count, texts=texts, prefill=prefill, limit=limit, text=text, include_usage=True)
    return ConverseRequest(model=model, stream=stream, chat=chat, call=call)


def count_input(model: str, body: object) -> int:
    """`CountTokens`' `inputTokens` of a decoded body `{"input": {"converse": {...}}}`: the prompt
    tokens the same Converse request is answered with (words of its message and system text).

    Raises:
        RequestError: no `input.converse` (the simulator does not count `invokeModel` bodies), or
            a Converse request `parse_request` refuses.
    """
    given = body.get("input") if isinstance(body, dict) else None
    converse = given.get("converse") if isinstance(given, dict) else None
    if not isinstance(converse, dict):
        raise RequestError(
            "1 validation error detected: Value at 'input' failed to satisfy constraint: the simulator counts "
            "'converse' inputs only"
        )
    return parse_request(model, converse, stream=False).chat.prompt_tokens


def with_answer_length(req: ConverseRequest, answer_tokens: int) -> ConverseRequest:
    """`req` answered by a model whose full answer is `answer_tokens` long (step `len<N>`)."""
    return replace(req, chat=openai_wire.with_answer_length(req.chat, answer_tokens))


def stop_reason(req: ConverseRequest) -> str:
    """`max_tokens` when the limit cut the answer, else `tool_use` for a call, else `end_turn`."""
    if req.chat.cut:
        return "max_tokens"
    return "tool_use" if req.call is not None else "end_turn"


def usage(req: ConverseRequest, output_tokens: int | None = None) -> dict[str, int]:
    """The `usage` object."""
    output = openai_wire.produced_tokens(req.chat) if output_tokens is None else output_tokens
    prompt = req.chat.prompt_tokens
    return {"inputTokens": prompt, "outputTokens": output, "totalTokens": prompt + output}


def tool_use_id(seq: int) -> str:
    """The `toolUseId` of attempt `seq`'s call (`tooluse_...`, as Bedrock names them)."""
    return f"tooluse_sim{seq:012d}"


def answer(req: ConverseRequest, *, seq: int, latency_ms: int, stop: str | None = None) -> dict[str, Any]:
    """The complete Converse answer; `stop` (a guardrail's `guardrail_intervened`, the model's
    `content_filtered`) answers `GUARDRAIL_TEXT` with that stop reason instead."""
    if stop is not None:
        content: list[dict[str, Any]] = [{"text": GUARDRAIL_TEXT}]
        tokens: int | None = len(GUARDRAIL_TEXT.split())
    elif req.call is None:
        content, tokens = [{"text": "".join(pieces(req))}], None
    else:
        tool_input = json.loads("".join(pieces(req)))
        content, tokens = (
            [{"toolUse": {"toolUseId": tool_use_id(seq), "name": req.call.name, "input": tool_input}}],
            None,
        )
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop or stop_reason(req),
        "usage": usage(req, tokens),
        "metrics": {"latencyMs": latency_ms},
    }


def _padded(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "p": PADDING[: 1 + len(json.dumps(data)) % len(PADDING)]}


def opening_events(req: ConverseRequest, *, seq: int) -> list[tuple[str, dict[str, Any]]]:
    """`messageStart`, and a `contentBlockStart` naming the tool for a tool use."""
    events = [("messageStart", _padded({"role": "assistant"}))]
    if req.call is not None:
        start = {"toolUse": {"toolUseId": tool_use_id(seq), "name": req.call.name}}
        events.append(("contentBlockStart", _padded({"start": start, "contentBlockIndex": 0})))
    return events


def delta_event(req: ConverseRequest, piece: str) -> tuple[str, dict[str, Any]]:
    """One `contentBlockDelta` (`text`, or `toolUse.input` for a tool)."""
    delta = {"text": piece} if req.call is None else {"toolUse": {"input": piece}}
    return "contentBlockDelta", _padded({"delta": delta, "contentBlockIndex": 0})


def closing_events(
    req: ConverseRequest, *, latency_ms: int, stop: str | None = None, with_stop: bool = True
) -> list[tuple[str, dict[str, Any]]]:
    """`contentBlockStop`, then (unless `nodone`) `messageStop` and `metadata` (usage, metrics)."""
    events = [("contentBlockStop", _padded({"contentBlockIndex": 0}))]
    if with_stop:
        tokens = len(GUARDRAIL_TEXT.split()) if stop is not None else None
        events.append(("messageStop", _padded({"stopReason": stop or stop_reason(req)})))
        metadata = {"usage": usage(req, tokens), "metrics": {"latencyMs": latency_ms}}
        events.append(("metadata", _padded(metadata)))
    return events
