"""Model types: what kind of request a catalog model serves, and the embedding models' one rule.

Owns: `ModelType` (`chat`, the default, or `embedding`), `Operation` (the upstream call a
request asks for: `chat`, `embeddings`, or legacy `completions`), which operation each
model type serves (`serves`), and the rule that keeps an embedding request's vectors
comparable: an embedding model is served only by its own offers (retries and provider
fallback within the model), so no reroute, model fallback, special fallback list or
strategy may name it, and a plan for it is confined to its offers (`confined`).
Vectors of two embedding models live in different spaces: an index built with one model
cannot be searched with the other's vectors, so an answer from another model is wrong
even when it is well-formed.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

import msgspec

from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy

ModelType = Literal["chat", "embedding"]
Operation = Literal["chat", "embeddings", "completions"]

SERVES: Final[dict[ModelType, frozenset[Operation]]] = {
    "chat": frozenset({"chat", "completions"}),
    "embedding": frozenset({"embeddings"}),
}
"""Model type -> the operations its models serve."""

VECTOR_SPACE_RULE: Final = (
    "an embedding model is served only by its own offers (retries and provider fallback within the model): "
    "vectors of different models are not comparable"
)
"""Why a setting may not name an embedding model (config check and admin API messages)."""


def serves(model_type: ModelType, operation: Operation) -> bool:
    """Whether a model of `model_type` serves `operation`."""
    return operation in SERVES[model_type]


def mismatch_message(model: str, model_type: ModelType, operation: Operation) -> str:
    """The 400's message for a request of `operation` to `model` of another type (names the route to use)."""
    if model_type == "embedding":
        return f"The model `{model}` is an embedding model; send it to `POST /v1/embeddings`."
    route = "/v1/embeddings" if operation == "embeddings" else "/v1/completions"
    return (
        f"The model `{model}` is a chat model; `POST {route}` serves models of "
        f"`type: {'embedding' if operation == 'embeddings' else 'chat'}` only."
    )


def naming_embedding_models(named: Iterable[tuple[str, str]], embedding_models: frozenset[str]) -> str | None:
    """The first (path, entry) of `named` (`turnout.core.scopes.named_models`' pairs) whose entry is
    an embedding model, as a refusal message (`path: ...`), or None when none is."""
    for path, entry in named:
        if entry in embedding_models:
            return f"{path}: `{entry}` is an embedding model; {VECTOR_SPACE_RULE}"
    return None


def confined(settings: RoutingSettings, policy: Policy) -> tuple[RoutingSettings, Policy]:
    """`settings` and `policy` for a plan of an embedding model: no reroute, no model fallback of
    any list, no comparable alternate, no strategy (`VECTOR_SPACE_RULE`); the key mode and the retry and provider fallback
    rules unchanged. A wildcard (`*`) fallback map of a scope, meant for its chat models, so never
    reaches an embedding request."""
    kept = RoutingSettings(key_mode=settings.key_mode)
    fallback = policy.fallback
    if fallback.models or fallback.comparable:
        fallback = msgspec.structs.replace(fallback, models=(), comparable=False)
        policy = msgspec.structs.replace(policy, fallback=fallback)
    return kept, policy
