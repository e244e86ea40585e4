"""Request checks of the ingress: size, authentication, JSON and schema.

Owns: turning a raw HTTP request into (identity, decoded body) or a
`RequestRejected` with the right status and the offending field named.
Nothing is enqueued for a rejected request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec
from starlette.requests import Request

from turnout.core.limits import MAX_REQUEST_TOKENS
from turnout.core.native import passed_headers
from turnout.core.plan import MAX_MODEL_ID_CHARS
from turnout.core.preferences import InvalidPreferences, Preferences, decode_preferences
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.json_reason import body_fault, json_refusal
from turnout.tenancy.identity import Authenticator, Identity

_decode = msgspec.json.Decoder()
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

UNAUTHORIZED = RequestRejected(
    401,
    "Invalid or missing gateway key. Send it as `Authorization: Bearer <key>`.",
    error_type="invalid_request_error",
    code="invalid_api_key",
)


def authenticate(request: Request, keyring: Authenticator) -> Identity:
    """The caller's identity from `Authorization: Bearer …` (also `x-api-key`), also kept on
    `request.state` (`key`: the key's name, `org`) so a later refusal's row names them.

    Raises:
        RequestRejected: 401, the same body for a missing and a wrong key.
        GatewayUnavailable: 503 `redis_unavailable` (Retry-After 1 s) for a key
            presented before the keys were ever read (Redis unreachable since
            the process started): the key may well be valid.
    """
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        token = request.headers.get("x-api-key", "")
    token = token.strip()
    identity = keyring.authenticate(token)
    if identity is None:
        if token and not keyring.loaded:
            raise keys_not_loaded()
        raise UNAUTHORIZED
    request.state.key = identity.key  # a later refusal names the caller (`door.DoorRefusals`)
    request.state.org = identity.org
    return identity


def provider_headers(surface: str, headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The client headers `surface` passes to a provider of its own family (`turnout.core.native.passed_headers`:
    `anthropic-beta`, `openai-beta`, ...), as (lower-case name, value) pairs in the order sent.

    Raises:
        RequestRejected: 400 naming a passed header whose value is not printable ASCII, which no
            provider could be sent.
    """
    passed = passed_headers(surface, headers)
    for name, value in passed:
        if not (value.isascii() and value.isprintable()):
            raise RequestRejected(400, f"{name}: the header's value must be printable ASCII", param=name)
    return passed


def keys_not_loaded() -> GatewayUnavailable:
    """The 503 for a key that cannot be checked yet (`authenticate`)."""
    return GatewayUnavailable(
        "The gateway has not read its keys yet (Redis unreachable since it started); retry shortly.",
        retry_after_s=1,
        code="redis_unavailable",
    )


async def read_body(request: Request, limit_bytes: int) -> bytes:
    """The request body, refusing more than `limit_bytes` (413) without reading it all.

    Raises:
        RequestRejected: 413 `request_too_large`; 415 `unsupported_content_encoding` for a
            body sent with a `Content-Encoding` other than `identity` (it would otherwise
            be read as JSON and refused as malformed, naming a byte, not the encoding).
    """
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise RequestRejected(
            415,
            f"Request bodies sent with Content-Encoding `{encoding[:40]}` are not accepted; "
            "send the JSON body uncompressed.",
            code="unsupported_content_encoding",
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
        raise _too_large(limit_bytes)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise _too_large(limit_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit_bytes: int) -> RequestRejected:
    return RequestRejected(
        413,
        f"Request body is larger than the gateway's limit of {limit_bytes} bytes.",
        code="request_too_large",
    )


def _invalid(message: str, param: str) -> RequestRejected:
    return RequestRejected(400, message, param=param, code="invalid_request")


def take_preferences(data: dict[str, Any]) -> Preferences:
    """Remove the body's `provider` object (it never goes upstream) and validate it (SPEC §10).

    Raises:
        RequestRejected: 400 naming the field (`provider.max_price.prompt`).
    """
    try:
        return decode_preferences(data.pop("provider", None))
    except InvalidPreferences as exc:
        raise _invalid(str(exc), exc.param) from exc


def decode_request(body: bytes) -> dict[str, Any]:
    """Decode a request body that every OpenAI-format route shares the first checks of: a
    non-empty JSON object whose `model` is a non-empty string of at most `MAX_MODEL_ID_CHARS`.

    Raises:
        RequestRejected: 400 naming the field (`body`, `model`, or the field holding a number
            no float holds).
    """
    if not body.strip():
        raise _invalid("The request body is empty; send a JSON object.", "body")
    try:
        data = _decode.decode(body)
    except msgspec.DecodeError as exc:
        reason, field = json_refusal(body, exc)  # a number no float holds: its field is the `param`
        raise _invalid(f"The request body {body_fault(reason)}: {reason}", field or "body") from exc
    except RecursionError as exc:
        raise _invalid("The request body is nested too deeply.", "body") from exc
    if not isinstance(data, dict):
        raise _invalid("The request body must be a JSON object.", "body")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("`model` is required and must be a non-empty string.", "model")
    if len(model) > MAX_MODEL_ID_CHARS:
        raise _invalid(f"`model` must be at most {MAX_MODEL_ID_CHARS} characters (got {len(model)}).", "model")
    return data


def invalid(message: str, param: str) -> RequestRejected:
    """The 400 `invalid_request` naming `param`, as every request check raises it."""
    return _invalid(message, param)


def parse_chat_request(body: bytes) -> dict[str, Any]:
    """Decode and check a chat completions body (OpenAI's required fields).

    Checks: a JSON object; `model` a non-empty string; `messages` a non-empty
    array of objects each with a known `role` and a string or array (or
    null) `content`; `stream` a boolean; when given, `max_tokens` /
    `max_completion_tokens` / `n` integers in range, `seed` a 64-bit integer,
    `temperature`, `top_p` and the penalties numbers in OpenAI's ranges,
    `stop` a string or at most 4 strings, `logit_bias` token ids (decimal
    strings) mapped to numbers from -100 to 100, each of `tools` a `function`
    or `custom` tool, and `stream_options`, `response_format`, `metadata` of
    the right JSON shape. Other fields, unknown ones included, pass through to
    the provider untouched (new provider fields keep working).

    Raises:
        RequestRejected: 400 naming the field (`param`).
    """
    data = decode_request(body)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("`messages` is required and must be a non-empty array.", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _invalid(f"`messages[{i}]` must be an object.", f"messages[{i}]")
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            roles = ", ".join(sorted(_ROLES))
            said = (
                f"is required: one of {roles}."
                if role is None
                else f"must be one of {roles} (got {msgspec.json.encode(role).decode()[:40]})."
            )
            raise _invalid(f"`messages[{i}].role` {said}", f"messages[{i}].role")
        _check_content(message, role, f"messages[{i}]")
    if "stream" in data and not isinstance(data["stream"], bool) and data["stream"] is not None:
        raise _invalid("`stream` must be a boolean.", "stream")
    for name, high in _INTEGERS.items():
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high):
            raise _invalid(f"`{name}` must be an integer from 1 to {high}.", name)
    seed = data.get("seed")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not _SEED_LOW <= seed <= _SEED_HIGH
    ):
        raise _invalid(f"`seed` must be an integer from {_SEED_LOW} to {_SEED_HIGH}.", "seed")
    for name, (low, top) in _NUMBERS.items():
        number = data.get(name)
        if number is not None and (
            isinstance(number, bool) or not isinstance(number, (int, float)) or not low <= number <= top
        ):
            raise _invalid(f"`{name}` must be a number from {low:g} to {top:g}.", name)
    for name, (kind, what) in _SHAPES.items():
        shaped = data.get(name)
        if shaped is not None and not isinstance(shaped, kind):
            raise _invalid(f"`{name}` must be {what}.", name)
    stop = data.get("stop")
    if isinstance(stop, list):
        _check_stop(stop)
    bias = data.get("logit_bias")
    if bias:
        _check_logit_bias(bias)
    for name in _BOOLEANS:
        flag = data.get(name)
        if flag is not None and not isinstance(flag, bool):
            raise _invalid(f"`{name}` must be a boolean.", name)
    options = data.get("stream_options")
    if options is not None and options.get("include_usage") is not None:
        if not isinstance(options["include_usage"], bool):
            raise _invalid("`stream_options.include_usage` must be a boolean.", "stream_options.include_usage")
    _check_tools(data.get("tools"))
    _check_tool_choice(data.get("tool_choice"))
    response_format = data.get("response_format")
    if response_format is not None and response_format.get("type") not in _RESPONSE_FORMATS:
        raise _invalid(
            f"`response_format.type` must be one of {', '.join(sorted(_RESPONSE_FORMATS))}.", "response_format.type"
        )
    return data


def _check_content(message: dict[str, Any], role: str, path: str) -> None:
    """A message's `content`: required for every role but `assistant` (which may carry tool calls instead),
    a string or an array of parts, each an object with a string `type`."""
    content = message.get("content")
    if content is None:
        if role not in _CONTENT_OPTIONAL:
            raise _invalid(f"`{path}.content` is required for a `{role}` message.", f"{path}.content")
        return
    if not isinstance(content, (str, list)):
        raise _invalid(f"`{path}.content` must be a string or an array of parts.", f"{path}.content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise _invalid(f"`{path}.content[{j}]` must be an object with a string `type`.", f"{path}.content[{j}]")


def _check_stop(stop: list[Any]) -> None:
    """`stop` given as an array: at most `_MAX_STOPS` strings (OpenAI Chat Completions reference:
    "Up to 4 sequences"). Raises `RequestRejected` 400 on `stop` (too many) or `stop[i]`."""
    if len(stop) > _MAX_STOPS:
        raise _invalid(f"`stop` must hold at most {_MAX_STOPS} sequences (got {len(stop)}).", "stop")
    for i, sequence in enumerate(stop):
        if not isinstance(sequence, str):
            raise _invalid(f"`stop[{i}]` must be a string.", f"stop[{i}]")


def _check_logit_bias(bias: dict[str, Any]) -> None:
    """`logit_bias` (an object, `_SHAPES`): each key a token id, a string of decimal digits, each value
    a number from -100 to 100 (OpenAI Chat Completions reference). Raises `RequestRejected` 400 on
    `logit_bias` (a key that is no token id) or `logit_bias.<token id>` (its value)."""
    for token, value in bias.items():
        if not (token.isascii() and token.isdigit()):
            got = msgspec.json.encode(token).decode()[:40]
            raise _invalid(f"`logit_bias` keys must be token ids, strings of decimal digits (got {got}).", "logit_bias")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -100 <= value <= 100:
            raise _invalid(f"`logit_bias.{token[:40]}` must be a number from -100 to 100.", f"logit_bias.{token[:40]}")


def _check_tools(tools: Any) -> None:
    """Each tool an object whose `type` is `function` or `custom` (`_TOOL_TYPES`); a `function`
    tool names its function with 1 to 64 letters, digits, `_` or `-` (OpenAI Chat Completions
    reference). An empty array passes, as clients that always send `tools` do. Raises
    `RequestRejected` 400 on `tools[i]`, `tools[i].type` or `tools[i].function.name`."""
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _invalid(f"`tools[{i}]` must be an object with a string `type`.", f"tools[{i}]")
        if tool["type"] not in _TOOL_TYPES:
            got = msgspec.json.encode(tool["type"]).decode()[:40]
            types = ", ".join(sorted(_TOOL_TYPES))
            raise _invalid(f"`tools[{i}].type` must be one of {types} (got {got}).", f"tools[{i}].type")
        if tool["type"] == "function":
            function = tool.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
                raise _invalid(
                    f"`tools[{i}].function.name` is required for a function tool.", f"tools[{i}].function.name"
                )
            if not _FUNCTION_NAME.fullmatch(function["name"]):
                raise _invalid(
                    f"`tools[{i}].function.name` must be 1 to 64 letters, digits, `_` or `-`.",
                    f"tools[{i}].function.name",
                )


def _check_tool_choice(choice: Any) -> None:
    """`tool_choice`: `none`, `auto`, `required`, or an object naming a tool by its string `type`
    (OpenAI Chat Completions reference; the object's content is the provider's to check)."""
    if choice is None or isinstance(choice, dict) and isinstance(choice.get("type"), str):
        return
    modes = ", ".join(sorted(_TOOL_CHOICES))
    if isinstance(choice, str) and choice not in _TOOL_CHOICES:
        got = msgspec.json.encode(choice).decode()[:40]
        raise _invalid(f"`tool_choice` must be one of {modes}, or an object naming a tool (got {got}).", "tool_choice")
    if not isinstance(choice, str):
        raise _invalid(f"`tool_choice` must be one of {modes}, or an object with a string `type`.", "tool_choice")


_TOOL_CHOICES = frozenset({"none", "auto", "required"})
"""`tool_choice` strings of the OpenAI Chat Completions reference."""
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A function tool's name (OpenAI Chat Completions reference: a-z, A-Z, 0-9, `_` and `-`, at most 64)."""
_TOOL_TYPES = frozenset({"function", "custom"})
"""`tools[].type` values of the OpenAI Chat Completions reference."""
_MAX_STOPS = 4
"""Most stop sequences in an array `stop` (OpenAI Chat Completions reference: "Up to 4 sequences")."""
_SEED_LOW, _SEED_HIGH = -(2**63), 2**63 - 1
"""`seed`'s range: a 64-bit signed integer (OpenAI's OpenAPI specification of Chat Completions)."""
_BOOLEANS = ("parallel_tool_calls", "logprobs", "store")
"""Boolean fields beside `stream` (OpenAI Chat Completions reference)."""
_CONTENT_OPTIONAL = frozenset({"assistant", "function"})
"""Roles whose `content` may be absent or null (an assistant turn with tool calls; a legacy function call)."""
_RESPONSE_FORMATS = frozenset({"text", "json_object", "json_schema"})
"""`response_format.type` values of the OpenAI Chat Completions reference."""


_INTEGERS = {"max_tokens": MAX_REQUEST_TOKENS, "max_completion_tokens": MAX_REQUEST_TOKENS, "n": 128}
"""Integer fields and their largest value (OpenAI's documented `n` ceiling is 128; token counts are int32)."""
_NUMBERS = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
"""Number fields and their ranges (OpenAI Chat Completions reference)."""
_SHAPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "tools": (list, "an array"),
    "stream_options": (dict, "an object"),
    "stop": ((str, list), "a string or an array"),
    "response_format": (dict, "an object"),
    "metadata": (dict, "an object"),
    "logit_bias": (dict, "an object"),
    "user": (str, "a string"),
}
"""Fields that must have a JSON shape when given (their content is the provider's to check, but
`stop`'s and `logit_bias`'s: `_check_stop`, `_check_logit_bias`)."""
