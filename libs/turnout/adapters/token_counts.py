"""A provider's own count of a Messages request's input tokens, whatever its family.

Owns: `COUNTING_KINDS`, the provider kinds whose API counts tokens, and `provider_count`, the
one count-tokens call of one provider for one target: built by the family's module (the
Anthropic API's `POST /v1/messages/count_tokens`, `anthropic_wire.count_tokens_body`; the
Gemini API's `:countTokens`, `gemini.count_tokens_call`; Vertex AI's `:countTokens` or Claude's
`count-tokens:rawPredict`, `vertex.count_tokens_call`; Bedrock's `CountTokens`,
`bedrock.count_tokens_call`, SigV4-signed), with the call's credential (a `vertex` provider's
access token made as a model call's is, `google_tokens.authorized`), and its answer read.
Counting is not a model call: nothing here records an attempt or counts for a breaker; any
failure is None and the caller goes on (the next offer, or an estimate).
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import httpx
import msgspec

from turnout.adapters import bedrock, gemini, vertex
from turnout.adapters.anthropic_wire import ANTHROPIC_VERSION, COUNT_PATH, count_tokens_body
from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.google_tokens import authorized
from turnout.adapters.prepared import post_request
from turnout.config import ProviderConfig
from turnout.core.types import Target

_encode = msgspec.json.Encoder()
COUNTING_KINDS: Final = frozenset({"anthropic", "gemini", "vertex", "bedrock"})
"""The provider kinds whose API counts a request's input tokens."""


def count_spec(provider: ProviderConfig, target: Target, *, timeout_s: float, request_id: str = "") -> CallSpec:
    """The `CallSpec` of a count on `target` at `provider` (its credential as resolved for the
    caller: `turnout.tenancy.byok.resolve_call`); `timeout_s` bounds the token and the call each."""
    return CallSpec(
        target=target,
        base_url=provider.base_url,
        api_key=provider.api_key or "",
        body=b"",
        timeout_s=timeout_s,
        request_id=request_id,
        kind=provider.kind,
        region=provider.region,
        project=provider.project,
        location=provider.location,
        credentials_file=provider.credentials_file,
    )


def count_request(
    client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
) -> tuple[httpx.Request | AttemptResult, str]:
    """(the count-tokens request of `spec`'s provider kind, the answer's count field) (module doc).

    Args:
        spec: the call (`count_spec`; a `vertex` one carrying its access token in `api_key`).
        messages: the Anthropic Messages body.
        request: its OpenAI chat form (`turnout_ingress.messages_wire.to_openai_request`), or
            None when it has none (then only the Anthropic-speaking APIs count it).

    Raises:
        WireError: the body cannot be expressed in the family's API.
        ValueError: `spec.kind` does not count tokens.
    """
    model, key = spec.target.model, spec.api_key
    if spec.kind == "anthropic":
        headers = [("x-api-key", key), ("anthropic-version", ANTHROPIC_VERSION), ("content-type", "application/json")]
        body = _encode.encode(count_tokens_body(messages, model))
        return post_request(client, spec.base_url, COUNT_PATH, headers, body), "input_tokens"
    if spec.kind == "vertex":
        path, payload, field = vertex.count_tokens_call(spec, messages, request)
        return gemini.json_request(client, spec, path, ("authorization", f"Bearer {key}"), payload, stream=False), field
    if request is None or spec.kind not in COUNTING_KINDS:
        raise ValueError(f"a {spec.kind} provider cannot count this request")
    if spec.kind == "gemini":
        path, payload = gemini.count_tokens_call(model, request)
        return gemini.json_request(client, spec, path, ("x-goog-api-key", key), payload, stream=False), "totalTokens"
    path, raw = bedrock.count_tokens_call(model, request)
    return bedrock.signed_request(client, spec, path, raw), "inputTokens"


async def provider_count(
    client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
) -> int | None:
    """The input tokens `spec`'s provider counts for `messages` (see `count_request`), or None on
    any failure: no credential or token, a body the family cannot express, no 200 within
    `spec.timeout_s`, an answer without a whole count (>= 0)."""
    ready = await authorized(spec)
    if isinstance(ready, AttemptResult):
        return None
    try:
        built, field = count_request(client, ready, messages, request)
        if isinstance(built, AttemptResult):
            return None
        async with asyncio.timeout(spec.timeout_s):
            response = await client.send(built)
        count = response.json().get(field) if response.status_code == 200 else None
    except Exception:  # noqa: BLE001 - any failure (a WireError, httpx's, the transport's, a bad body): go on
        return None
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None
