"""Model types: which operation each type serves, and the embedding models' one rule (vectors stay comparable)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.model_types import (
    VECTOR_SPACE_RULE,
    confined,
    mismatch_message,
    naming_embedding_models,
    serves,
)
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.core.types import Target


@pytest.mark.parametrize(
    ("model_type", "operation", "served"),
    [
        ("chat", "chat", True),
        ("chat", "completions", True),
        ("chat", "embeddings", False),
        ("embedding", "embeddings", True),
        ("embedding", "chat", False),
        ("embedding", "completions", False),
    ],
)
def test_each_type_serves_its_operations(model_type: str, operation: str, served: bool) -> None:
    assert serves(model_type, operation) is served  # type: ignore[arg-type]


def test_a_mismatch_names_the_model_and_the_route_to_use() -> None:
    assert mismatch_message("emb", "embedding", "chat") == (
        "The model `emb` is an embedding model; send it to `POST /v1/embeddings`."
    )
    said = mismatch_message("gpt", "chat", "embeddings")
    assert "`gpt` is a chat model" in said and "/v1/embeddings" in said and "type: embedding" in said


def test_a_setting_naming_an_embedding_model_is_refused_with_its_path_and_why() -> None:
    named = [("orgs.a.settings.fallbacks.gpt[0]", "gpt-mini"), ("orgs.a.settings.fallbacks.emb[0]", "emb-2")]
    said = naming_embedding_models(named, frozenset({"emb-2"}))
    assert said == f"orgs.a.settings.fallbacks.emb[0]: `emb-2` is an embedding model; {VECTOR_SPACE_RULE}"
    assert naming_embedding_models(named[:1], frozenset({"emb-2"})) is None


names = st.text(alphabet="abc-", min_size=1, max_size=5)
model_maps = st.dictionaries(st.one_of(st.just("*"), names), st.tuples(names), max_size=3)


@given(
    reroutes=st.tuples(names),
    fallbacks=model_maps,
    context=model_maps,
    content=model_maps,
    plan=model_maps,
    gateway=st.tuples(names),
    key_mode=st.sampled_from(["own_only", "own_then_shared", "shared_only"]),
    rule=st.one_of(st.none(), names),
)
def test_a_confined_plan_names_no_other_model_and_keeps_the_rest(
    reroutes: tuple[str, ...],
    fallbacks: dict[str, tuple[str, ...]],
    context: dict[str, tuple[str, ...]],
    content: dict[str, tuple[str, ...]],
    plan: dict[str, tuple[str, ...]],
    gateway: tuple[str, ...],
    key_mode: str,
    rule: str | None,
) -> None:
    settings = RoutingSettings(
        reroutes=reroutes,
        fallbacks=fallbacks,
        context_window_fallbacks=context,
        content_policy_fallbacks=content,
        plan_fallbacks=plan,
        key_mode=key_mode,  # type: ignore[arg-type]
        custom_targets={"custom:e:m": Target(provider="custom:e", model="m", catalog_model="custom:e:m")},
        strategy_rule=rule,
    )
    base = Policy()
    policy = msgspec.structs.replace(base, fallback=msgspec.structs.replace(base.fallback, models=gateway))
    kept, kept_policy = confined(settings, policy)
    assert kept == RoutingSettings(key_mode=settings.key_mode)
    assert kept_policy.fallback.models == ()
    assert msgspec.structs.replace(kept_policy, fallback=policy.fallback) == policy  # nothing else changed
