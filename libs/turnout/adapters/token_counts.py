"""A provider's own count of a Messages request's input tokens, whatever its family.

Owns: `COUNTERS` (`COUNTING_KINDS`), the provider kinds whose API counts tokens and the family
that builds each one's count request, and `provider_count`, the one count-tokens call of one
provider for one target: built by the family's `count_request` method
(`turnout.adapters.base.TokenCounting`: the Anthropic API's `POST /v1/messages/count_tokens`,
`AnthropicMessages`; the Gemini API's `:countTokens`, `GeminiChat`; Vertex AI's `:countTokens`
or Claude's `count-tokens:rawPredict`, `VertexAI`; Bedrock's `CountTokens`, SigV4-signed,
`BedrockConverse`), with the call's credential (a `vertex` provider's
access token made as a model call's is, `google_tokens.authorized`), and its answer read with
its outcome (`CountAttempt`): the caller records it and counts it for the count's own breaker
(`turnout_ingress.surfaces.messages.tokens`); a failure gives no count and the caller goes on
(the next offer, or an estimate).
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import httpx
import msgspec

from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES
from turnout.adapters.base import AttemptResult, CallSpec, CountCall, TokenCounting, error_status_outcome
from turnout.adapters.bedrock import BEDROCK_CONVERSE
from turnout.adapters.chat_parts import WireError
from turnout.adapters.gemini import GEMINI_CHAT
from turnout.adapters.google_tokens import authorized
from turnout.adapters.specs import provider_call
from turnout.adapters.transport import transport_error_of
from turnout.adapters.vertex import VERTEX_AI
from turnout.config import ProviderConfig, ProviderKind
from turnout.core.types import Outcome, Target, TransportError

COUNTERS: Final[Mapping[ProviderKind, TokenCounting]] = MappingProxyType(
    {"anthropic": ANTHROPIC_MESSAGES, "gemini": GEMINI_CHAT, "vertex": VERTEX_AI, "bedrock": BEDROCK_CONVERSE}
)
"""Provider kind -> the family that builds its count-tokens request (read-only)."""
COUNTING_KINDS: Final = frozenset(COUNTERS)
"""The provider kinds whose API counts a request's input tokens."""


def count_spec(provider: ProviderConfig, target: Target, *, timeout_s: float, request_id: str = "") -> CallSpec:
    """The `CallSpec` of a count on `target` at `provider` (its credential as resolved for the
    caller: `turnout.tenancy.byok.resolve_call`); `timeout_s` bounds the token and the call each."""
    return provider_call(provider, target, body=b"", timeout_s=timeout_s, request_id=request_id)


def count_request(
    client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
) -> CountCall:
    """(the count-tokens request of `spec`'s provider kind, the answer's count field): built by
    the kind's family (`COUNTERS`, `TokenCounting.count_request`).

    Args:
        spec: the call (`count_spec`; a `vertex` one carrying its access token in `api_key`).
        messages: the Anthropic Messages body.
        request: its OpenAI chat form (`turnout_ingress.messages_wire.to_openai_request`), or
            None when it has none (then only the Anthropic-speaking APIs count it).

    Raises:
        WireError: the body cannot be expressed in the family's API.
        ValueError: `spec.kind` does not count tokens.
    """
    counter = COUNTERS.get(spec.kind)
    if counter is None:
        raise ValueError(f"a {spec.kind} provider cannot count this request")
    return counter.count_request(client, spec, messages, request)


class CountAttempt(msgspec.Struct, frozen=True, kw_only=True):
    """One count-tokens call's result.

    Attributes:
        tokens: the provider's count (>= 0), or None when it gave none.
        outcome: what the call produced, for the count's breaker and record (a 200 with a
            count: status 200); None when no call was made that says anything of the provider
            (the body has no form in its API: a client matter).
        duration_ms: how long the call took, ms.
    """

    tokens: int | None
    outcome: Outcome | None
    duration_ms: float = 0.0


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


async def provider_count(
    client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
) -> CountAttempt:
    """The input tokens `spec`'s provider counts for `messages` (see `count_request`), with the
    call's outcome: a credential or token refused, a non-200 (the family-neutral error reading,
    `error_status_outcome`), a transport failure or no answer within `spec.timeout_s`, or a 200
    without a whole count (>= 0: a malformed answer) each give `tokens` None. Never raises."""
    started = time.monotonic()

    def took() -> float:
        return (time.monotonic() - started) * 1000

    ready = await authorized(spec)
    if isinstance(ready, AttemptResult):
        return CountAttempt(tokens=None, outcome=ready.outcome, duration_ms=took())
    try:
        built, field = count_request(client, ready, messages, request)
    except (WireError, ValueError):
        return CountAttempt(tokens=None, outcome=None)
    if isinstance(built, AttemptResult):
        return CountAttempt(tokens=None, outcome=built.outcome, duration_ms=took())
    try:
        async with asyncio.timeout(spec.timeout_s):
            response = await client.send(built)
    except TimeoutError:
        return CountAttempt(tokens=None, outcome=Outcome(transport=TransportError.ATTEMPT_TIMEOUT), duration_ms=took())
    except Exception as exc:  # noqa: BLE001 - httpx's and the transport's failures, mapped as a model call's
        return CountAttempt(tokens=None, outcome=Outcome(transport=transport_error_of(exc)), duration_ms=took())
    if response.status_code != 200:
        failed = error_status_outcome(response.status_code, response.headers, response.content, time.time())
        return CountAttempt(tokens=None, outcome=failed.outcome, duration_ms=took())
    try:
        count = _whole(msgspec.json.decode(response.content).get(field))
    except (msgspec.DecodeError, AttributeError):
        count = None
    if count is None:
        unread = Outcome(status=200, transport=TransportError.PROTOCOL, message="no count in the answer")
        return CountAttempt(tokens=None, outcome=unread, duration_ms=took())
    return CountAttempt(tokens=count, outcome=Outcome(status=200), duration_ms=took())
