"""Comparability classes in the file and the admin API (issue #45 item 7): `class:` on chat models,
`fallback.comparable` and `fallback.only` checked with their paths named; the router plans and
answers a comparable alternate (headers and records say so)."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from support.clocks import FakeClock
from support.routers import fake_router
from support.two_providers import TWO_PROVIDERS, completion
from turnout.adapters.base import Usage
from turnout.answer import answer_of
from turnout.catalog import Catalog
from turnout.catalog.references import model_users
from turnout.config import check_scope_settings, parse_config
from turnout.core.model_types import VECTOR_SPACE_RULE
from turnout.core.plan import Role, RoutingSettings
from turnout.core.policy import PolicyOverrides
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError
from turnout.observability.records import attempt_row
from turnout.router import RequestInfo

BASE = (
    TWO_PROVIDERS
    + """\
models:
  big:
    class: frontier-chat
    offers: [{provider: pa, model: big-a}]
  big-2:
    class: frontier-chat
    offers: [{provider: pb, model: big-b}]
  mini:
    class: small-chat
    offers: [{provider: pb, model: mini-b}]
  plain:
    offers: [{provider: pb, model: plain-b}]
  emb:
    type: embedding
    offers: [{provider: pa, model: emb-a}]
"""
)
NO_CLASSES = BASE.replace("    class: frontier-chat\n", "").replace("    class: small-chat\n", "")
ORG = """\
orgs:
  acme:
    keys:
      - {name: ci, key: tk-ci-123456789, settings: SETTINGS}
"""


def refused(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={})
    return str(caught.value)


def test_the_catalog_knows_each_chat_models_class() -> None:
    catalog = Catalog(parse_config(BASE, env={}))
    assert catalog.classes == {"big": "frontier-chat", "big-2": "frontier-chat", "mini": "small-chat"}


def test_a_file_without_classes_keeps_its_stored_catalog_bytes() -> None:
    """An unset `class` is never encoded: a catalog stored before the field stays the same."""
    config = parse_config(NO_CLASSES, env={})
    assert b'"class"' not in msgspec.json.encode(config.raw.models)
    assert b'"class":"frontier-chat"' in msgspec.json.encode(parse_config(BASE, env={}).raw.models)


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (
            ("  emb:\n    type: embedding\n", "  emb:\n    type: embedding\n    class: frontier-chat\n"),
            "models.emb.class",
            VECTOR_SPACE_RULE,
        ),
        (
            ("    class: small-chat\n", "    class: frontier_chat\n"),
            "models.mini.class",
            "did you mean 'frontier-chat'?",
        ),
        (("    class: small-chat\n", "    class: Small Chat\n"), "models.mini.class", "Expected `str` matching regex"),
    ],
    ids=["embedding", "misspelt", "bad-name"],
)
def test_a_wrong_class_is_refused_naming_it(edit: tuple[str, str], path: str, words: str) -> None:
    message = refused(BASE.replace(*edit))
    assert path in message and words in message


def test_a_class_of_one_model_with_no_close_name_is_allowed() -> None:
    catalog = Catalog(parse_config(BASE.replace("class: small-chat", "class: reasoning"), env={}))
    assert catalog.classes["mini"] == "reasoning"


def test_comparable_with_no_class_in_the_catalog_is_refused_at_every_scope() -> None:
    gateway = refused(NO_CLASSES + "policy: {fallback: {comparable: true}}\n")
    assert gateway.startswith("policy.fallback.comparable: no catalog model declares a `class`")
    scope = refused(NO_CLASSES + ORG.replace("SETTINGS", "{policy: {fallback: {comparable: true}}}"))
    assert scope.startswith("orgs.acme.keys[0].settings.policy.fallback.comparable: no catalog model")
    parse_config(BASE + "policy: {fallback: {comparable: true}}\n", env={})


@pytest.mark.parametrize(
    ("settings", "path", "words"),
    [
        ("{policy: {fallback: {only: [nope]}}}", "orgs.acme.keys[0].settings.policy.fallback.only[0]", "unknown model"),
        (
            "{policy: {fallback: {only: [emb]}}}",
            "orgs.acme.keys[0].settings.policy.fallback.only[0]",
            VECTOR_SPACE_RULE,
        ),
        (
            "{policy: {fallback: {models: [plain, mini], only: [mini]}}}",
            "orgs.acme.keys[0].settings.policy.fallback.models[0]",
            "is not in orgs.acme.keys[0].settings.policy.fallback.only",
        ),
    ],
    ids=["unknown", "embedding", "models-outside-only"],
)
def test_a_scopes_only_is_checked_as_its_fallback_models_are(settings: str, path: str, words: str) -> None:
    message = refused(BASE + ORG.replace("SETTINGS", settings))
    assert path in message and words in message


def test_a_scopes_only_may_leave_out_the_gateways_models() -> None:
    config = parse_config(
        BASE
        + "policy: {fallback: {models: [plain]}}\n"
        + ORG.replace("SETTINGS", "{policy: {fallback: {only: [mini]}}}"),
        env={},
    )
    assert config.policy.fallback.models == ("plain",)


def test_the_gateway_policys_only_is_checked_and_counts_as_a_use_of_the_model() -> None:
    assert refused(BASE + "policy: {fallback: {only: [nope]}}\n").startswith("policy.fallback.only[0]: unknown model")
    config = parse_config(BASE + "policy: {fallback: {comparable: true, only: [big-2]}}\n", env={})
    assert model_users(config, "big-2") == ["policy.fallback.only[0]"]


def test_the_admin_apis_settings_check_says_the_same() -> None:
    config = parse_config(BASE, env={})
    bad = ScopeSettings(policy=merge_policy_overrides({"fallback": {"only": ["nope"]}}))
    with pytest.raises(ConfigError) as caught:
        check_scope_settings("keys.ci.settings", bad, config, None)
    assert "keys.ci.settings.policy.fallback.only[0]: unknown model 'nope'" in str(caught.value)
    check_scope_settings(
        "keys.ci.settings",
        ScopeSettings(policy=merge_policy_overrides({"fallback": {"comparable": True}})),
        config,
        None,
    )


def merge_policy_overrides(value: dict[str, object]) -> PolicyOverrides:
    return msgspec.convert(value, PolicyOverrides)


async def test_the_router_plans_and_answers_a_comparable_alternate() -> None:
    config = parse_config(BASE + "policy: {fallback: {comparable: true}, retry: {max_retries: 0}}\n", env={})
    catalog = Catalog(config)
    clock = FakeClock(0.0)
    hosts: list[str] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return (
            httpx.Response(503, json={"error": {"message": "down"}})
            if request.url.host == "pa.test"
            else completion("big-b")
        )

    router = fake_router(catalog, httpx.MockTransport(upstream), clock=clock)
    policy = config.policy
    plan, view = await router.plan("big", RoutingSettings(), policy)
    assert [(e.target.key, e.role) for e in plan.entries] == [
        ("pa/big-a", Role.PRIMARY),
        ("pb/big-b", Role.COMPARABLE_ALTERNATE),
    ]
    info = RequestInfo(request_id="rid", org="acme", requested_model="big")
    routed = await router.route(
        {"model": "big", "messages": []}, plan=plan, view=view, policy=policy, time_left_s=30, info=info
    )
    assert hosts == ["pa.test", "pb.test"]
    status, headers, _ = answer_of(routed, "rid")
    assert status == 200
    assert headers["x-turnout-comparable"] == "1" and headers["x-turnout-fallback"] == "1"
    assert headers["x-turnout-model"] == "big-b" and headers["x-turnout-attempts"] == "2"
    last = routed.records[-1]
    assert last.is_comparable and last.role is Role.COMPARABLE_ALTERNATE
    row = attempt_row(info, last, Usage(), catalog, ts=1.0, attempt_id="a2")
    assert row["is_comparable"] is True and row["role"] == "comparable_alternate" and row["is_fallback"] is True
    mini, _ = await router.plan("mini", RoutingSettings(), policy)  # another class: never big or big-2
    assert [e.target.catalog_model for e in mini.entries] == ["mini"]
