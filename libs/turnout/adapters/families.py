"""The registry of upstream API families: a provider's `kind` -> its family.

Owns: `FAMILIES`, the one place that says which `ApiFamily` speaks for a
provider kind (`turnout.config.ProviderKind`), and `OTHER_OPERATIONS`, which
family performs an operation other than chat (`turnout.core.model_types.Operation`:
embeddings, legacy completions) on a kind whose API has it; an offer marked `api: responses`
is the Responses family's (`family_for`); and `PROVIDER_NAMES`, a kind's well-known
`gen_ai.provider.name` for spans. `turnout.adapters.exchange`
looks every call up here (`family_for`); nothing else chooses a family.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Adding a family: write its module in `turnout/adapters/` (a class
implementing `turnout.adapters.base.ApiFamily`), name its kind in
`ProviderKind`, and add one line below (a test fails when the two differ), and
its semconv name to `PROVIDER_NAMES` when OpenTelemetry has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES
from turnout.adapters.azure_openai import AZURE_CHAT, AZURE_COMPLETIONS, AZURE_EMBEDDINGS
from turnout.adapters.base import ApiFamily
from turnout.adapters.bedrock import BEDROCK_CONVERSE
from turnout.adapters.gemini import GEMINI_CHAT
from turnout.adapters.gemini_embeddings import GEMINI_EMBEDDINGS
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.adapters.openai_operations import OPENAI_COMPLETIONS, OPENAI_EMBEDDINGS
from turnout.adapters.openai_responses import OPENAI_RESPONSES
from turnout.adapters.vertex import VERTEX_AI
from turnout.adapters.vertex_embeddings import VERTEX_EMBEDDINGS
from turnout.config import RESPONSES_KINDS, OfferApi, ProviderKind
from turnout.core.model_types import Operation

FAMILIES: Final[Mapping[ProviderKind, ApiFamily]] = MappingProxyType(
    {
        "openai": OPENAI_CHAT,
        "openai_compatible": OPENAI_CHAT,
        "anthropic": ANTHROPIC_MESSAGES,
        "azure_openai": AZURE_CHAT,
        "bedrock": BEDROCK_CONVERSE,
        "gemini": GEMINI_CHAT,
        "vertex": VERTEX_AI,
    }
)
"""Provider kind -> the API family its providers speak (read-only)."""

PROVIDER_NAMES: Final[Mapping[ProviderKind, str]] = MappingProxyType(
    {
        "openai": "openai",
        "anthropic": "anthropic",
        "azure_openai": "azure.ai.openai",
        "gemini": "gcp.gemini",
        "vertex": "gcp.vertex_ai",
        "bedrock": "aws.bedrock",
    }
)
"""Provider kind -> its OpenTelemetry GenAI well-known `gen_ai.provider.name`
(https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/); a kind absent here
(`openai_compatible`: any server) is named by `provider_name`."""

WELL_KNOWN_PROVIDER_NAMES: Final = frozenset(
    {*PROVIDER_NAMES.values(), "azure.ai.inference", "cohere", "deepseek", "gcp.gen_ai", "groq"}
    | {"ibm.watsonx.ai", "mistral_ai", "perplexity", "x_ai"}
)
"""Every well-known `gen_ai.provider.name` value of the GenAI semantic conventions."""


def provider_name(kind: ProviderKind, provider: str) -> str:
    """The `gen_ai.provider.name` of a call to `provider` (the catalog's name) of `kind`:
    `PROVIDER_NAMES[kind]`; for an OpenAI-compatible server, `provider` when the operator named
    it by a well-known value (`groq`, `deepseek`, ...), else `openai`, the API it speaks (the
    conventions' "best knowledge" rule; the operator's name is on spans as `turnout.provider`)."""
    named = PROVIDER_NAMES.get(kind)
    if named is not None:
        return named
    return provider if provider in WELL_KNOWN_PROVIDER_NAMES else "openai"


OTHER_OPERATIONS: Final[Mapping[tuple[ProviderKind, Operation], ApiFamily]] = MappingProxyType(
    {
        ("openai", "embeddings"): OPENAI_EMBEDDINGS,
        ("openai_compatible", "embeddings"): OPENAI_EMBEDDINGS,
        ("openai", "completions"): OPENAI_COMPLETIONS,
        ("openai_compatible", "completions"): OPENAI_COMPLETIONS,
        ("azure_openai", "embeddings"): AZURE_EMBEDDINGS,
        ("azure_openai", "completions"): AZURE_COMPLETIONS,
        ("gemini", "embeddings"): GEMINI_EMBEDDINGS,
        ("vertex", "embeddings"): VERTEX_EMBEDDINGS,
    }
)
"""(provider kind, operation) -> the family that performs it, for every operation but `chat`
(`FAMILIES`); a pair absent here is an operation the kind's API does not have."""


def family_for(kind: ProviderKind, operation: Operation = "chat", api: OfferApi = "chat") -> ApiFamily | None:
    """The family that performs `operation` on a provider of `kind` for an offer of `api`
    (`turnout.config.OfferApi`), or None when its API has no such call. An `api: responses`
    offer is the Responses family's (`OPENAI_RESPONSES`) for a chat operation on a kind that
    has it (`RESPONSES_KINDS`), whatever surface the request came on: the family refuses the
    requests it cannot send (`ApiFamily.refusal`)."""
    if api == "responses":
        return OPENAI_RESPONSES if operation == "chat" and kind in RESPONSES_KINDS else None
    if operation == "chat":
        return FAMILIES[kind]
    return OTHER_OPERATIONS.get((kind, operation))
