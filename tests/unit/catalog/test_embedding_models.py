"""Embedding models in the catalog: the file's and the admin API's checks refuse what would mix
vector spaces, and a plan for an embedding model holds its own offers only."""

from __future__ import annotations

import httpx
import pytest

from support.clocks import FakeClock
from support.routers import fake_router
from turnout.catalog import Catalog
from turnout.config import check_scope_settings, parse_config
from turnout.core.model_types import VECTOR_SPACE_RULE
from turnout.core.plan import Role, RoutingSettings
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError

BASE = """\
providers:
  oa: {kind: openai, base_url: "https://oa.test/v1", api_key: k1}
  vl: {kind: openai_compatible, base_url: "https://vl.test/v1", api_key: k2}
  an: {kind: anthropic, base_url: "https://an.test", api_key: k3}
models:
  emb:
    type: embedding
    offers:
      - {provider: oa, model: text-embedding-3-small}
      - {provider: vl, model: bge-small}
  emb-large:
    type: embedding
    offers: [{provider: oa, model: text-embedding-3-large}]
  chat:
    offers: [{provider: oa, model: gpt-4o-mini}, {provider: an, model: claude}]
  other-chat:
    offers: [{provider: vl, model: llama}]
"""


def _with(extra: str) -> str:
    return BASE + extra


def test_the_base_file_is_valid_and_the_catalog_knows_each_models_type() -> None:
    catalog = Catalog(parse_config(BASE, env={}))
    assert catalog.embedding_models == frozenset({"emb", "emb-large"})
    assert [catalog.type_of(m) for m in ("emb", "oa/emb", "chat", "custom:e:m", "nope")] == [
        "embedding",
        "embedding",
        "chat",
        "chat",
        "chat",
    ]


def test_an_embedding_model_offered_by_an_anthropic_provider_is_refused_naming_the_offer() -> None:
    text = BASE.replace("      - {provider: vl, model: bge-small}", "      - {provider: an, model: bge-small}")
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={})
    assert "models.emb.offers[1].provider" in str(caught.value)
    assert "serves no embeddings" in str(caught.value)


ORG = """\
orgs:
  acme:
    keys:
      - {name: ci, key: tk-ci-123456789, settings: SETTINGS}
"""


@pytest.mark.parametrize(
    ("settings", "path"),
    [
        ("{reroutes: [emb-large]}", "orgs.acme.keys[0].settings.reroutes[0]"),
        ("{fallbacks: {emb: [emb-large]}}", "orgs.acme.keys[0].settings.fallbacks.emb"),
        ("{fallbacks: {chat: [emb]}}", "orgs.acme.keys[0].settings.fallbacks.chat[0]"),
        ("{fallbacks: [emb-large]}", "orgs.acme.keys[0].settings.fallbacks[0]"),
        ("{context_window_fallbacks: {emb: [chat]}}", "orgs.acme.keys[0].settings.context_window_fallbacks.emb"),
        ("{policy: {fallback: {models: [emb]}}}", "orgs.acme.keys[0].settings.policy.fallback.models[0]"),
        (
            "{strategy: [{name: cheap, at_percent: 50, model: emb-large}]}",
            "orgs.acme.keys[0].settings.strategy[0].model",
        ),
    ],
)
def test_a_setting_naming_an_embedding_model_is_refused_with_its_path_and_the_reason(settings: str, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_with(ORG.replace("SETTINGS", settings)), env={})
    assert str(caught.value).startswith(f"{path}: ")
    assert VECTOR_SPACE_RULE in str(caught.value)


def test_the_gateway_policys_fallback_models_may_not_name_one_either() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_with("policy: {fallback: {models: [emb]}}\n"), env={})
    assert str(caught.value).startswith("policy.fallback.models[0]: `emb` is an embedding model")


def test_the_admin_apis_settings_check_refuses_it_too() -> None:
    config = parse_config(BASE, env={})
    with pytest.raises(ConfigError) as caught:
        check_scope_settings("squads.research.settings", ScopeSettings(fallbacks={"emb": ["emb-large"]}), config, None)
    assert "squads.research.settings.fallbacks.emb" in str(caught.value)
    check_scope_settings("squads.research.settings", ScopeSettings(fallbacks={"chat": ["other-chat"]}), config, None)


async def test_a_plan_for_an_embedding_model_holds_its_own_offers_whatever_the_scope_says() -> None:
    config = parse_config(BASE, env={})
    catalog = Catalog(config)
    clock = FakeClock(0.0)
    router = fake_router(
        catalog, httpx.MockTransport(lambda r: httpx.Response(500)), clock=clock, breakers=clock.breakers(catalog)
    )
    wildcard = RoutingSettings(
        reroutes=("other-chat",),
        fallbacks={"*": ("chat",)},
        context_window_fallbacks={"*": ("other-chat",)},
        plan_fallbacks={"*": ("chat",)},
    )
    plan, _ = await router.plan("emb", wildcard, config.policy)
    assert {e.target.catalog_model for e in plan.entries} == {"emb"}
    assert {e.target.key for e in plan.entries} == {"oa/text-embedding-3-small", "vl/bge-small"}
    assert {e.role for e in plan.entries} <= {Role.PRIMARY, Role.PROVIDER_FALLBACK}
    pinned, _ = await router.plan("vl/emb", wildcard, config.policy)
    assert [e.target.key for e in pinned.entries] == ["vl/bge-small"]
    chat, _ = await router.plan("chat", wildcard, config.policy)  # a chat model still follows the scope
    assert "other-chat" in {e.target.catalog_model for e in chat.entries}
