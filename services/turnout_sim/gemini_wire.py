"""Gemini `generateContent` wire format for the simulator: request fields, answers, errors.

Owns: reading the request fields the simulator honours on the Gemini API's and Vertex AI's
`...models/{model}:generateContent` / `:streamGenerateContent` (`contents` — required —,
`systemInstruction`, `generationConfig.maxOutputTokens`, `tools[].functionDeclarations` and
`toolConfig.functionCallingConfig`), the `GenerateContentResponse` of an answer (whole, or one
per streamed piece: `data: {...}\\r\\n\\r\\n`), its blocked forms, and Google's error bodies
`{"error": {"code", "message", "status", "details"}}` per status.
Must not import: aiohttp or any I/O; pure functions of their arguments.

The answer is the OpenAI side's deterministic text (`tok0 tok1 ...`, N = `maxOutputTokens`
capped at 4096, else 12), computed by `openai_wire` from an equivalent `ChatRequest`. A request
with function declarations whose mode is not `NONE` gets one `functionCall` part instead (the
first of `allowedFunctionNames`, else the first declaration), its `args` built from the
declaration's `parametersJsonSchema` (or `parameters`; see `tool_calls`); a request whose last
turn holds a `functionResponse` gets text quoting it (`Tool result: ...`). An answer cut by
`maxOutputTokens` (`len<N>`) ends with `finishReason: MAX_TOKENS`.
Sources: https://ai.google.dev/api/generate-content, https://ai.google.dev/gemini-api/docs/troubleshooting
(error statuses and wordings), https://cloud.google.com/apis/design/errors (`details`: `RetryInfo`, `ErrorInfo`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from turnout_sim import embeddings_wire, openai_wire, tool_calls
from turnout_sim.openai_wire import RequestError
from turnout_sim.tool_calls import ToolCall

STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    505: "INTERNAL",
    529: "UNAVAILABLE",
}
"""HTTP status -> the Google error `status` of a bare status step."""

_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
    "or other valid authentication credential.",
    403: "The caller does not have permission",
    404: "models/{model} is not found for API version v1beta, or is not supported for generateContent.",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
RATE_LIMITED = (
    "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)
"""The Gemini API's wording of every 429 (a per-minute limit as much as a spent quota)."""
KEY_INVALID = "API key not valid. Please pass a valid API key."
NO_KEY = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)

ErrorBody = dict[str, Any]


def error(status: int, message: str, details: list[dict[str, Any]] | None = None) -> ErrorBody:
    """Google's error body for HTTP `status` (its `status` name from `STATUS_NAMES`)."""
    body: dict[str, Any] = {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}
    if details:
        body["details"] = details
    return {"error": body}


def status_error(status: int, model: str) -> ErrorBody:
    """The body of a bare error status step (`UNAVAILABLE` for 503, ...)."""
    return error(status, _MESSAGES.get(status, f"HTTP {status}").format(model=model))


def retry_error(seconds: float) -> ErrorBody:
    """A 429 `RESOURCE_EXHAUSTED` with a `QuotaFailure` and a `RetryInfo` of `seconds` (`"20s"`)."""
    delay = f"{seconds:g}s"
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
                }
            ],
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
    ]
    return error(429, f"{RATE_LIMITED} Please retry in {seconds:g}s.", details)


def key_invalid_error() -> ErrorBody:
    """The 400 of a key Google refuses (`ErrorInfo.reason: API_KEY_INVALID`)."""
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }
    return error(400, KEY_INVALID, [info])


def quota_error() -> ErrorBody:
    """A spent quota: 429 `RESOURCE_EXHAUSTED` without a retry delay."""
    return error(429, RATE_LIMITED)


def context_error(prompt_tokens: int) -> ErrorBody:
    """The 400 of a prompt over the model's window."""
    used = max(prompt_tokens, 1_048_577)
    return error(400, f"The input token count ({used}) exceeds the maximum number of tokens allowed (1048576).")


@dataclass(frozen=True, slots=True, kw_only=True)
class GeminiRequest:
    """The honoured fields of a `generateContent` request.

    Attributes:
        model: the model named by the URL, echoed as `modelVersion`.
        stream: the stream method was called.
        chat: the equivalent OpenAI-side request (answer text, usage, a quoted result).
        call: the function call the answer makes (see `tool_calls`), else None.
    """

    model: str
    stream: bool
    chat: openai_wire.ChatRequest
    call: ToolCall | None = None


def _texts(content: Any) -> list[str]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p["text"] for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]


def field(obj: Any, name: str) -> Any:
    """`obj[name]` by its lowerCamelCase name or its proto name (`parametersJsonSchema` or
    `parameters_json_schema`: Google's JSON parsers accept both, and the SDK sends some fields
    by the second), None when absent or `obj` is no object."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    return obj.get("".join(f"_{c.lower()}" if c.isupper() else c for c in name))


def _decision(body: dict[str, Any], contents: list[Any]) -> tuple[ToolCall | None, str | None]:
    """(call, None), (None, quoted function response) or (None, None) for text."""
    parts = field(contents[-1], "parts")
    responses = [r for r in (field(p, "functionResponse") for p in parts or []) if isinstance(r, dict)]
    if responses:
        return None, " ".join(json.dumps(r.get("response"), separators=(",", ":")) for r in responses)
    config = field(field(body, "toolConfig"), "functionCallingConfig")
    if field(config, "mode") == "NONE":
        return None, None
    pairs = [
        (d["name"], field(d, "parametersJsonSchema") or field(d, "parameters"))
        for tool in body.get("tools") or []
        for d in field(tool, "functionDeclarations") or []
        if isinstance(d, dict) and isinstance(d.get("name"), str)
    ]
    allowed = field(config, "allowedFunctionNames")
    chosen = allowed[0] if isinstance(allowed, list) and allowed and isinstance(allowed[0], str) else None
    return tool_calls.choose(pairs, chosen), None


def parse_request(body: object, model: str, *, stream: bool) -> GeminiRequest:
    """Read the honoured fields of a decoded `generateContent` body for `model`.

    Raises:
        RequestError: not an object, or `contents` missing or empty (Google's 400).
    """
    if not isinstance(body, dict):
        raise RequestError(error(400, "Invalid JSON payload received."))
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise RequestError(error(400, "* GenerateContentRequest.contents: contents is not specified\n"))
    given = field(field(body, "generationConfig"), "maxOutputTokens")
    limit = given if isinstance(given, int) and not isinstance(given, bool) else None
    count = min(limit or openai_wire.DEFAULT_TOKENS, openai_wire.MAX_TOKENS_CAP)
    texts = [t for c in contents for t in _texts(c)] + _texts(field(body, "systemInstruction"))
    call, result = _decision(body, contents)
    text = None if result is None else tuple(tool_calls.quote_words(result))
    if text is not None:
        count = min(len(text), count)
    chat = openai_wire.ChatRequest(
        model=model,
        stream=stream,
        include_usage=False,
        completion_tokens=count,
        prompt_tokens=sum(len(t.split()) for t in texts),
        limit=limit,
        cut=text is not None and count < len(text),
        text=text,
    )
    return GeminiRequest(model=model, stream=stream, chat=chat, call=call)


def with_answer_length(req: GeminiRequest, answer_tokens: int) -> GeminiRequest:
    """`req` answered by a model whose full answer is `answer_tokens` long (`len<N>`)."""
    return replace(req, chat=openai_wire.with_answer_length(req.chat, answer_tokens))


def usage(req: GeminiRequest) -> dict[str, int]:
    """The `usageMetadata` of the full answer."""
    produced = openai_wire.produced_tokens(req.chat)
    prompt = req.chat.prompt_tokens
    return {"promptTokenCount": prompt, "candidatesTokenCount": produced, "totalTokenCount": prompt + produced}


def _call_args(req: GeminiRequest) -> dict[str, Any]:
    assert req.call is not None
    args: dict[str, Any] = json.loads(tool_calls.arguments_json(req.call, "".join(openai_wire.answer_pieces(req.chat))))
    return args


def pieces(req: GeminiRequest) -> list[dict[str, Any]]:
    """The parts of the answer, one per streamed event: text pieces, or one whole `functionCall`."""
    if req.call is not None:
        return [{"functionCall": {"name": req.call.name, "args": _call_args(req)}}]
    return [{"text": piece} for piece in openai_wire.answer_pieces(req.chat)]


def _response(req: GeminiRequest, response_id: str, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": req.model, "responseId": response_id}
    if finish is not None:
        out["usageMetadata"] = usage(req)
    return out


def finish(req: GeminiRequest) -> str:
    """The answer's `finishReason`: `MAX_TOKENS` when the limit cut it, else `STOP`."""
    return "MAX_TOKENS" if req.chat.cut and req.call is None else "STOP"


def answer(req: GeminiRequest, *, response_id: str) -> dict[str, Any]:
    """The complete `GenerateContentResponse`."""
    parts = pieces(req)
    if req.call is None:
        parts = [{"text": "".join(str(p["text"]) for p in parts)}]
    return _response(req, response_id, parts, finish(req))


def stream_events(req: GeminiRequest, *, response_id: str) -> list[dict[str, Any]]:
    """The streamed responses: one per piece, the last with the `finishReason` and usage."""
    events = [_response(req, response_id, [part], None) for part in pieces(req)]
    events.append(_response(req, response_id, [{"text": ""}], finish(req)))
    return events


def safety_finished(req: GeminiRequest, *, response_id: str) -> dict[str, Any]:
    """An answer the safety filters ended before any content (`finishReason: SAFETY`)."""
    ratings = [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    ]
    candidate = {
        "content": {"role": "model", "parts": []},
        "finishReason": "SAFETY",
        "index": 0,
        "safetyRatings": ratings,
    }
    return {
        "candidates": [candidate],
        "usageMetadata": usage(replace(req, chat=replace(req.chat, completion_tokens=0))),
        "modelVersion": req.model,
        "responseId": response_id,
    }


def prompt_blocked(req: GeminiRequest, *, response_id: str, reason: str = "SAFETY") -> dict[str, Any]:
    """An answer to a prompt the filters blocked (`promptFeedback.blockReason`, no candidate)."""
    return {
        "promptFeedback": {"blockReason": reason},
        "usageMetadata": {"promptTokenCount": req.chat.prompt_tokens, "totalTokenCount": req.chat.prompt_tokens},
        "modelVersion": req.model,
        "responseId": response_id,
    }


def batch_texts(body: object) -> tuple[list[str], int | None]:
    """(texts, `outputDimensionality` or None) of a `batchEmbedContents` body (`requests[]` of
    `{"model", "content": {"parts": [{"text"}]}, "outputDimensionality"}`).

    Raises:
        RequestError: no `requests`, or one without text (Google's 400).
    """
    requests = field(body, "requests")
    if not isinstance(requests, list) or not requests:
        raise RequestError(error(400, "* BatchEmbedContentsRequest.requests: requests is not specified\n"))
    texts = ["".join(_texts(field(r, "content"))) for r in requests]
    if not all(texts):
        raise RequestError(error(400, "* BatchEmbedContentsRequest.requests[].content: content is not specified\n"))
    dimensions = field(requests[0], "outputDimensionality")
    return texts, dimensions if isinstance(dimensions, int) and dimensions > 0 else None


def embeddings(model: str, texts: list[str], dimensions: int | None) -> dict[str, Any]:
    """The `batchEmbedContents` answer: one unit vector per text (`embeddings_wire.vector`, the
    model's full length or `dimensions`)."""
    size = min(dimensions or embeddings_wire.model_dimensions(model), embeddings_wire.model_dimensions(model))
    return {"embeddings": [{"values": embeddings_wire.vector(model, text, size)} for text in texts]}


def predict_texts(body: object) -> tuple[list[str], int | None]:
    """(texts, `parameters.outputDimensionality` or None) of a Vertex AI `:predict` body for a
    text-embedding model (`{"instances": [{"content", "task_type"?, "title"?}], "parameters"?}`).

    Raises:
        RequestError: no `instances`, or one without `content` (Google's 400).
    """
    instances = field(body, "instances")
    if not isinstance(instances, list) or not instances:
        raise RequestError(error(400, "Invalid JSON payload: instances is not specified"))
    texts = [i.get("content") if isinstance(i, dict) else None for i in instances]
    if not all(isinstance(t, str) and t for t in texts):
        raise RequestError(error(400, "Invalid instance: content is not specified"))
    dimensions = field(field(body, "parameters"), "outputDimensionality")
    return [str(t) for t in texts], dimensions if isinstance(dimensions, int) and dimensions > 0 else None


def predictions(model: str, texts: list[str], dimensions: int | None) -> dict[str, Any]:
    """Vertex AI's `:predict` answer for text embeddings: one prediction per text, its unit vector
    in `embeddings.values` (as `embeddings`) and its words in `embeddings.statistics.token_count`;
    `metadata.billableCharacterCount` the texts' characters."""
    vectors = embeddings(model, texts, dimensions)["embeddings"]
    return {
        "predictions": [
            {"embeddings": {"values": v["values"], "statistics": {"truncated": False, "token_count": len(t.split())}}}
            for v, t in zip(vectors, texts, strict=True)
        ],
        "metadata": {"billableCharacterCount": sum(len(t) for t in texts)},
    }


def sse_event(obj: object) -> bytes:
    """One SSE event as Google frames them: `data: <compact json>\\r\\n\\r\\n`."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\r\n\r\n"


MALFORMED_EVENT = b'data: {"candidates": [\r\n\r\n'
"""An event whose data is truncated JSON (`badchunk`)."""
