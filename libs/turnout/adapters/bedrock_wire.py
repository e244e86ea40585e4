"""Amazon Bedrock Converse API <-> OpenAI Chat Completions: pure translation.

Owns: the request translation a `bedrock` provider needs (an OpenAI chat request ->
a Converse request body), the reading of a Converse answer (-> an OpenAI
`chat.completion`), the stop-reason and usage tables, and the endpoint paths of one
model (`converse_path`). The stream's events are `bedrock_events`'; the signing and the
HTTP exchange `turnout.aws` and `bedrock`.
Must not import: httpx, botocore, services, FastAPI, arq; no I/O, no clock.

Sources: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
(request: `messages[{role, content[ContentBlock]}]`, `system[{text}]`, `inferenceConfig
{maxTokens, temperature, topP, stopSequences}`, `toolConfig{tools[{toolSpec{name,
description, inputSchema{json}}}], toolChoice{auto|any|tool{name}}}`; answer:
`output.message.content`, `stopReason`, `usage{inputTokens, outputTokens, totalTokens,
cacheReadInputTokens, cacheWriteInputTokens}`) and .../API_runtime_ContentBlock.html
(`text`, `image{format, source{bytes}}`, `toolUse{toolUseId, name, input}`,
`toolResult{toolUseId, content[{text}], status}`).

Decisions (where the two APIs differ):

- `system` / `developer` messages, wherever they stand, become `system` text blocks, in order.
- Turns of the same role are merged (Converse wants user and assistant to alternate); a
  `tool` message is a `toolResult` block of a user turn.
- Images: base64 data URLs only (`image.source.bytes`; png, jpeg, gif, webp); an http(s)
  URL is refused (Converse reads images from bytes or S3 only).
- `tool_choice: none` sends no `toolChoice`, and no tools unless the conversation holds
  tool calls or results (Converse requires `toolConfig` then; it has no "none").
- `response_format` `json_schema` / `json_object` is refused: Converse has no structured
  output across the model families it serves, so such a request goes to another offer
  (the target is skipped as unsupported, not failed).
- `n` > 1, `logprobs` and the legacy `function` role are refused; fields with no Converse
  counterpart (`seed`, penalties, `user`, `parallel_tool_calls`, `stream_options`, ...) are
  dropped. `temperature` is clamped to 0-1 (the range Bedrock's models share).
"""

from __future__ import annotations

import json
from typing import Any, Final
from urllib.parse import quote

from turnout.adapters.anthropic_wire import image_block
from turnout.adapters.chat_parts import WireError, chat_usage, function_specs, text_of, tool_call_inputs, user_parts

FAMILY: Final = "Bedrock"
"""How refusals name the family."""
MEDIA_FORMATS: Final[dict[str, str]] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
"""Image media type -> Converse `image.format`."""
FINISH_REASON: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
"""Converse `stopReason` -> OpenAI `finish_reason` (unknown or absent: `stop`)."""
POLICY_STOPS: Final = frozenset({"guardrail_intervened", "content_filtered"})
"""Stop reasons that mean the provider's content policy (a guardrail or the model's filter) ended the answer."""


def converse_path(model_id: str, *, stream: bool) -> str:
    """`/model/{modelId}/converse` (or `/converse-stream`), the id percent-encoded as the AWS
    SDKs encode a URI label: every character but `A-Z a-z 0-9 - . _ ~` (`:` -> `%3A`,
    `/` -> `%2F`; an inference profile ARN stays one segment). Pure."""
    return f"/model/{quote(model_id, safe='-._~')}/{'converse-stream' if stream else 'converse'}"


def _image(url: Any, param: str) -> dict[str, Any]:
    """A Converse image block for an OpenAI `image_url.url` (a base64 data URL)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        raise WireError(f"`{param}` must be a base64 data URL for {FAMILY} providers (no image URLs).", param)
    source = image_block(url, param)["source"]
    image_format = MEDIA_FORMATS.get(str(source["media_type"]).lower())
    if image_format is None:
        raise WireError(f"`{param}`: {FAMILY} takes png, jpeg, gif or webp images.", param)
    return {"image": {"format": image_format, "source": {"bytes": source["data"]}}}


def _user_blocks(content: Any, param: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    if not isinstance(content, list):
        raise WireError(f"`{param}` must be a string or an array of parts.", param)
    return user_parts(content, param, text=lambda t: {"text": t}, image=_image, family=FAMILY)


def _tool_uses(calls: Any, param: str) -> list[dict[str, Any]]:
    return [
        {"toolUse": {"toolUseId": c.call_id, "name": c.name, "input": c.arguments}}
        for c in tool_call_inputs(calls, param)
    ]


def _append(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add a turn, merging it into the previous one of the same role (Converse alternates)."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _messages(messages: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(system blocks, turns, whether the turns hold tool calls or results)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    tooled = False
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        param = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role in ("system", "developer"):
            system.append({"text": text_of(content, f"{param}.content")})
        elif role == "user":
            _append(turns, "user", _user_blocks(content, f"{param}.content"))
        elif role == "assistant":
            text = text_of(content, f"{param}.content")
            blocks = [{"text": text}] if text else []
            if message.get("tool_calls"):
                tooled = True
                blocks += _tool_uses(message["tool_calls"], f"{param}.tool_calls")
            _append(turns, "assistant", blocks)
        elif role == "tool":
            tooled = True
            result = {
                "toolUseId": str(message.get("tool_call_id", "")),
                "content": [{"text": text_of(content, f"{param}.content")}],
            }
            _append(turns, "user", [{"toolResult": result}])
        else:
            raise WireError(f"`{param}.role` {role!r} is not supported by {FAMILY} providers.", f"{param}.role")
    return system, turns, tooled


def _tool_specs(tools: Any) -> list[dict[str, Any]]:
    return [
        {
            "toolSpec": {
                "name": f.name,
                "inputSchema": {"json": f.parameters},
                **({"description": f.description} if f.description else {}),
            }
        }
        for f in function_specs(tools)
    ]


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    """Converse `toolChoice` for an OpenAI `tool_choice` (None: none sent)."""
    if choice is None or choice in ("auto", "none"):
        return {"auto": {}} if choice == "auto" else None
    if choice == "required":
        return {"any": {}}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"tool": {"name": choice["function"].get("name")}}
    raise WireError("`tool_choice` must be auto, none, required or a named function.", "tool_choice")


def _refuse_unsupported(body: dict[str, Any]) -> None:
    if isinstance(body.get("n"), int) and body["n"] > 1:
        raise WireError(f"`n` greater than 1 is not supported by {FAMILY} providers.", "n")
    if body.get("logprobs"):
        raise WireError(f"`logprobs` is not supported by {FAMILY} providers.", "logprobs")
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in ("json_schema", "json_object"):
        raise WireError(
            f"`response_format` {kind} is not supported by {FAMILY} providers (the Converse API has no structured output).",
            "response_format",
        )


def to_converse_request(body: dict[str, Any]) -> dict[str, Any]:
    """A Converse (and ConverseStream) request body for an OpenAI chat request (pure).

    The model is not in the body: it is the path's `{modelId}` (`converse_path`).

    Args:
        body: the OpenAI chat completion request (decoded JSON).

    Returns:
        The Converse request (JSON-ready dict); see the module doc for the decisions.

    Raises:
        WireError: a field Converse cannot express (`param` names it).
    """
    _refuse_unsupported(body)
    system, turns, tooled = _messages(body.get("messages"))
    if not turns:  # Converse's `messages` needs one turn (a 400 ValidationException otherwise): refused before a call
        raise WireError(
            "`messages` holds no user or assistant message (only system text): Bedrock providers need at least "
            "one user message.",
            "messages",
        )
    out: dict[str, Any] = {"messages": turns}
    if system:
        out["system"] = system
    inference: dict[str, Any] = {}
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int):
        inference["maxTokens"] = limit
    if isinstance(body.get("temperature"), (int, float)):
        inference["temperature"] = min(max(float(body["temperature"]), 0.0), 1.0)
    if isinstance(body.get("top_p"), (int, float)):
        inference["topP"] = body["top_p"]
    stop = body.get("stop")
    if stop:
        inference["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    if inference:
        out["inferenceConfig"] = inference
    choice = _tool_choice(body.get("tool_choice"))
    if body.get("tools") and (body.get("tool_choice") != "none" or tooled):
        config: dict[str, Any] = {"tools": _tool_specs(body["tools"])}
        if choice is not None:
            config["toolChoice"] = choice
        out["toolConfig"] = config
    return out


# ----------------------------------------------------------------- answers


def openai_usage(usage: Any) -> dict[str, Any]:
    """OpenAI `usage` for a Converse `usage` (`chat_usage`: cache reads and writes counted as prompt tokens)."""
    usage = usage if isinstance(usage, dict) else {}
    return chat_usage(
        fresh=int(usage.get("inputTokens") or 0),
        read=int(usage.get("cacheReadInputTokens") or 0),
        written=int(usage.get("cacheWriteInputTokens") or 0),
        output=int(usage.get("outputTokens") or 0),
    )


def finish_reason(stop_reason: Any) -> str:
    """OpenAI `finish_reason` for a Converse `stopReason` (`FINISH_REASON`; unknown: `stop`)."""
    return FINISH_REASON.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def tool_call(use: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call for a Converse `toolUse` block's value."""
    arguments = json.dumps(use.get("input") if use.get("input") is not None else {}, separators=(",", ":"))
    return {
        "id": str(use.get("toolUseId", "")),
        "type": "function",
        "function": {"name": str(use.get("name", "")), "arguments": arguments},
    }


def answer_content(data: Any) -> list[Any] | None:
    """The content blocks of a Converse answer (`output.message.content`), or None when `data`
    is not one."""
    output = data.get("output") if isinstance(data, dict) else None
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else None


def to_openai_completion(
    data: dict[str, Any], content: list[Any], *, answer_id: str, model: str, created_s: int
) -> dict[str, Any]:
    """An OpenAI `chat.completion` for a Converse answer (pure).

    Text blocks are joined into `content` (null when the answer is only tool calls);
    `toolUse` blocks become `tool_calls`; reasoning and other blocks are dropped.

    Args:
        data: the decoded Converse answer.
        content: its content blocks (`answer_content`).
        answer_id: the completion's `id` (Bedrock sends none: the `x-amzn-RequestId`).
        model: the completion's `model` (Bedrock names none in the answer).
        created_s: `created`, integer epoch seconds.
    """
    blocks = [b for b in content if isinstance(b, dict)]
    text = "".join(str(b["text"]) for b in blocks if "text" in b)
    calls = [tool_call(b["toolUse"]) for b in blocks if isinstance(b.get("toolUse"), dict)]
    reply: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None, "refusal": None}
    if calls:
        reply["tool_calls"] = calls
    choice = {"index": 0, "message": reply, "logprobs": None, "finish_reason": finish_reason(data.get("stopReason"))}
    return {
        "id": answer_id,
        "object": "chat.completion",
        "created": created_s,
        "model": model,
        "choices": [choice],
        "usage": openai_usage(data.get("usage")),
    }
