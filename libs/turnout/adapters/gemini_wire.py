"""Gemini `generateContent` <-> OpenAI Chat Completions: pure translation.

Owns: the request translation a Gemini upstream needs (an OpenAI `chat.completion` request
-> a `GenerateContentRequest`), the reading of a `GenerateContentResponse` into an OpenAI
`chat.completion`, and the tables both directions share (finish reasons, usage, the finish
reasons of a safety block). The same body serves the Gemini API and Vertex AI's Gemini
models (`publishers/google`). The streaming translation lives in `gemini_events`.
Must not import: httpx, services, FastAPI, arq; no I/O, no clock (times are passed in).

Sources: https://ai.google.dev/api/generate-content (request: `contents` of roles `user` /
`model`, `systemInstruction`, `tools[].functionDeclarations` with `parametersJsonSchema`,
`toolConfig.functionCallingConfig` modes `AUTO` / `ANY` / `NONE` with
`allowedFunctionNames`, `generationConfig` `temperature` / `topP` / `maxOutputTokens` /
`stopSequences` / `seed` / `responseMimeType` / `responseJsonSchema`; response: `candidates[]`
with `content.parts` — `text`, `thought`, `functionCall` {`id`, `name`, `args`},
`thoughtSignature` — `finishReason`, `promptFeedback.blockReason`, `usageMetadata`),
https://ai.google.dev/gemini-api/docs/function-calling (`functionResponse` parts),
https://ai.google.dev/gemini-api/docs/openai (a thought signature carried on a tool call as
`extra_content.google.thought_signature`).

Decisions (where the two APIs differ):

- `system` / `developer` messages, wherever they stand, become `systemInstruction` (their
  texts joined by a blank line, in order).
- Consecutive turns of one role are merged into one `content` (parallel function results
  travel together, as Gemini expects them).
- A `tool` message becomes a `functionResponse` part named after the call it answers (found
  by `tool_call_id` among the assistant's earlier calls); its content is the `response`
  object when it is a JSON object, else `{"result": <text>}`.
- Images: `data:` URLs become `inlineData`; any other image URL is refused (Gemini reads
  remote files only from its own Files API / Cloud Storage).
- `n` > 1, the legacy `function` role, non-function tools and non-text, non-image parts are
  refused (`WireError`, answered as a 400 without a call). `logprobs`, `presence_penalty`,
  `frequency_penalty`, `user`, `stream_options`, ... are dropped.
- A tool call's id is Gemini's `functionCall.id` when it sends one, else
  `call_<responseId>_<n>` (n counts the answer's calls from 0).
"""

from __future__ import annotations

import json
from typing import Any, Final

from turnout.adapters.chat_parts import WireError, content_parts, data_url, function_calls, function_tools, text_of

FINISH_REASON: Final[dict[str, str]] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
}
"""Gemini `finishReason` -> OpenAI `finish_reason` (others, unknown or absent: `stop`;
`tool_calls` when the answer holds function calls and ended with `STOP`)."""

SAFETY_FINISHES: Final = frozenset(k for k, v in FINISH_REASON.items() if v == "content_filter")
"""The finish reasons of an answer a safety or content filter ended (content policy)."""


def inline_data(url: str, param: str) -> dict[str, Any]:
    """A Gemini `inlineData` part for a `data:<media type>;base64,<data>` URL.

    Raises:
        WireError: any other URL (an http(s) image cannot be sent to Gemini as is).
    """
    inline = data_url(url)
    if inline is None:
        raise WireError(f"`{param}` must be a base64 data URL for Gemini providers.", param)
    return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}


def _user_parts(content: Any, param: str) -> list[dict[str, Any]]:
    return content_parts(content, param, text=lambda t: {"text": t}, image=inline_data, family="Gemini")


def _call_parts(calls: Any, param: str, names: dict[str, str]) -> list[dict[str, Any]]:
    """`functionCall` parts for an assistant's `tool_calls`; records each call's id -> name."""
    parts = []
    for call, name, args in function_calls(calls, param):
        names[str(call.get("id", ""))] = name
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
        signature = _thought_signature(call)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _thought_signature(call: dict[str, Any]) -> str | None:
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) else None


def _response_part(message: dict[str, Any], param: str, names: dict[str, str]) -> dict[str, Any]:
    """The `functionResponse` part of a `tool` message."""
    call_id = str(message.get("tool_call_id", ""))
    name = names.get(call_id)
    if name is None:
        raise WireError(f"`{param}.tool_call_id` names no earlier tool call.", f"{param}.tool_call_id")
    text = text_of(message.get("content"), f"{param}.content")
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    response = decoded if isinstance(decoded, dict) else {"result": text}
    return {"functionResponse": {"name": name, "response": response}}


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    """Add a turn, merging it into the previous one of the same role."""
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def _tools(tools: Any) -> list[dict[str, Any]]:
    declarations = []
    for fn in function_tools(tools, "Gemini"):
        entry: dict[str, Any] = {"name": fn.get("name")}
        if fn.get("description"):
            entry["description"] = fn["description"]
        if fn.get("parameters"):
            entry["parametersJsonSchema"] = fn["parameters"]
        declarations.append(entry)
    return [{"functionDeclarations": declarations}]


def _tool_config(choice: Any) -> dict[str, Any] | None:
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]
        return {"functionCallingConfig": {"mode": mode}}
    named = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(named, dict) and isinstance(named.get("name"), str):
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [named["name"]]}}
    raise WireError("`tool_choice` must be auto, none, required or a named function.", "tool_choice")


def _generation_config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if isinstance(body.get("temperature"), (int, float)):
        config["temperature"] = body["temperature"]
    if isinstance(body.get("top_p"), (int, float)):
        config["topP"] = body["top_p"]
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int):
        config["maxOutputTokens"] = limit
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    if isinstance(body.get("seed"), int):
        config["seed"] = body["seed"]
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in ("json_object", "json_schema"):
        config["responseMimeType"] = "application/json"
    if kind == "json_schema":
        spec = response_format.get("json_schema") if isinstance(response_format, dict) else None
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if isinstance(schema, dict):
            config["responseJsonSchema"] = schema
    return config


def to_gemini_request(body: dict[str, Any]) -> dict[str, Any]:
    """A `GenerateContentRequest` for an OpenAI chat request (the model travels in the URL).

    Args:
        body: the OpenAI chat completion request (decoded JSON).

    Returns:
        The Gemini request (JSON-ready dict); see the module doc for the decisions taken.

    Raises:
        WireError: a field that Gemini cannot express (`param` names it).
    """
    if isinstance(body.get("n"), int) and body["n"] > 1:
        raise WireError("`n` greater than 1 is not supported by Gemini providers.", "n")
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name, as the assistant's calls came
    for i, message in enumerate(body.get("messages") or []):
        param = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer"):
            system.append(text_of(message.get("content"), f"{param}.content"))
        elif role == "user":
            _append(contents, "user", _user_parts(message.get("content"), f"{param}.content"))
        elif role == "assistant":
            text = text_of(message.get("content"), f"{param}.content")
            parts = [{"text": text}] if text else []
            if message.get("tool_calls"):
                parts += _call_parts(message["tool_calls"], f"{param}.tool_calls", names)
            _append(contents, "model", parts or [{"text": ""}])
        elif role == "tool":
            _append(contents, "user", [_response_part(message, param, names)])
        else:
            raise WireError(f"`{param}.role` {role!r} is not supported by Gemini providers.", f"{param}.role")
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
    tool_config = _tool_config(body.get("tool_choice"))
    if tool_config is not None:
        out["toolConfig"] = tool_config
    generation = _generation_config(body)
    if generation:
        out["generationConfig"] = generation
    return out


# ----------------------------------------------------------------- responses


def openai_usage(metadata: Any) -> dict[str, Any]:
    """OpenAI `usage` for a Gemini `usageMetadata` (token counts).

    `prompt_tokens` = `promptTokenCount` (+ `toolUsePromptTokenCount`); `completion_tokens` =
    `candidatesTokenCount` + `thoughtsTokenCount` (thinking is billed as output);
    `prompt_tokens_details.cached_tokens` = `cachedContentTokenCount`.
    """
    m = metadata if isinstance(metadata, dict) else {}
    prompt = int(m.get("promptTokenCount") or 0) + int(m.get("toolUsePromptTokenCount") or 0)
    thoughts = int(m.get("thoughtsTokenCount") or 0)
    output = int(m.get("candidatesTokenCount") or 0) + thoughts
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": int(m.get("cachedContentTokenCount") or 0)},
        "completion_tokens_details": {"reasoning_tokens": thoughts},
    }


def finish_reason(reason: Any, has_calls: bool) -> str:
    """OpenAI `finish_reason` for a Gemini `finishReason` (see `FINISH_REASON`)."""
    mapped = FINISH_REASON.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "tool_calls" if has_calls and mapped == "stop" else mapped


def first_candidate(data: dict[str, Any]) -> dict[str, Any]:
    """The answer's first candidate ({} when there is none)."""
    candidates = data.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return first if isinstance(first, dict) else {}


def parts_of(candidate: dict[str, Any]) -> list[dict[str, Any]]:
    """A candidate's content parts (thought parts left out)."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict) and not p.get("thought")] if isinstance(parts, list) else []


def tool_call(part: dict[str, Any], response_id: str, number: int) -> dict[str, Any] | None:
    """An OpenAI tool call for a `functionCall` part (None for another part); its id per the module doc."""
    call = part.get("functionCall")
    if not isinstance(call, dict):
        return None
    call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
    arguments = json.dumps(call.get("args") or {}, separators=(",", ":"))
    out: dict[str, Any] = {
        "id": call_id or f"call_{response_id}_{number}",
        "type": "function",
        "function": {"name": str(call.get("name", "")), "arguments": arguments},
    }
    if isinstance(part.get("thoughtSignature"), str):
        out["extra_content"] = {"google": {"thought_signature": part["thoughtSignature"]}}
    return out


def blocked(data: dict[str, Any]) -> str | None:
    """Why a safety or content filter blocked the whole answer, or None: the prompt's
    `promptFeedback.blockReason`, or a first candidate that a filter ended without content."""
    feedback = data.get("promptFeedback")
    reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
    if isinstance(reason, str) and reason:
        return f"the prompt was blocked by the provider's safety filters (blockReason {reason})"
    candidate = first_candidate(data)
    finish = candidate.get("finishReason")
    if finish in SAFETY_FINISHES and not any(p.get("text") or p.get("functionCall") for p in parts_of(candidate)):
        return f"the answer was blocked by the provider's safety filters (finishReason {finish})"
    return None


def is_answer(data: Any) -> bool:
    """True for a `GenerateContentResponse` (candidates or prompt feedback)."""
    return isinstance(data, dict) and (isinstance(data.get("candidates"), list) or "promptFeedback" in data)


def to_openai_completion(data: dict[str, Any], *, model: str, created_s: int) -> dict[str, Any]:
    """An OpenAI `chat.completion` for a `GenerateContentResponse` (its first candidate).

    Text parts are concatenated into `content` (thought parts dropped); `functionCall` parts
    become `tool_calls`; `content` is null when the answer is only calls.

    Args:
        data: the decoded response (`is_answer` holds).
        model: the model name when the response names none (`modelVersion`).
        created_s: `created`, integer epoch seconds.
    """
    candidate = first_candidate(data)
    parts = parts_of(candidate)
    response_id = str(data.get("responseId") or "")
    text = "".join(str(p.get("text", "")) for p in parts if "text" in p)
    calls: list[dict[str, Any]] = []
    for part in parts:
        call = tool_call(part, response_id, len(calls))
        if call is not None:
            calls.append(call)
    reply: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None, "refusal": None}
    if calls:
        reply["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{response_id}" if response_id else "chatcmpl-gemini",
        "object": "chat.completion",
        "created": created_s,
        "model": str(data.get("modelVersion") or model),
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": finish_reason(candidate.get("finishReason"), bool(calls)),
            }
        ],
        "usage": openai_usage(data.get("usageMetadata")),
    }
