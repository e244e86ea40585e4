"""What still names a catalog model or provider: every place the file's rules would refuse a catalog
without it, found with the validation's paths, and the words of the refusal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import yaml

from turnout.catalog.references import MAX_LISTED, model_users, provider_users, still_used
from turnout.config import parse_config, with_catalog
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError
from turnout.stored.orgs import KeyDoc, OrgDoc, ProviderKeyDoc, SquadDoc
from turnout.vault import Binding, Vault, generate_key

CATALOG: dict[str, Any] = {
    "providers": {
        "east": {"kind": "openai", "base_url": "https://east.example/v1", "api_key": "sk-east-0001"},
        "west": {"kind": "openai", "base_url": "https://west.example/v1", "api_key": "sk-west-0001"},
    },
    "models": {
        "gpt": {"offers": [{"provider": "east", "model": "gpt"}, {"provider": "west", "model": "gpt"}]},
        "claude": {"offers": [{"provider": "west", "model": "claude"}]},
        "spare": {"offers": [{"provider": "east", "model": "spare"}]},
    },
}
ENDPOINT = {"vllm": {"base_url": "https://vllm.example/v1"}}
KEY = "tk-references-0000000001"


def config(**top: Any) -> Any:
    """A configuration with `CATALOG` and the top-level sections `top`."""
    return parse_config(yaml.safe_dump({**CATALOG, **top}, sort_keys=False), env={})


def org(settings: dict[str, Any], where: str = "org") -> dict[str, Any]:
    """`orgs: {acme: ...}` with `settings` on the org, its squad `research` or its key `ci`."""
    acme: dict[str, Any] = {
        "custom_endpoints": ENDPOINT,
        "squads": {"research": {}},
        "keys": [{"name": "ci", "key": KEY}],
    }
    if where == "org":
        acme["settings"] = settings
    elif where == "squad":
        acme["squads"] = {"research": {"settings": settings}}
    else:
        acme["keys"] = [{"name": "ci", "key": KEY, "settings": settings}]
    return {"acme": acme}


# (top-level sections naming `gpt` once, the path that names it)
ONE_USE: list[tuple[dict[str, Any], str]] = [
    ({"policy": {"fallback": {"models": ["claude", "gpt"]}}}, "policy.fallback.models[1]"),
    ({"orgs": org({"reroutes": ["gpt"]})}, "orgs.acme.settings.reroutes[0]"),
    ({"orgs": org({"fallbacks": ["claude", "gpt"]})}, "orgs.acme.settings.fallbacks[1]"),
    ({"orgs": org({"fallbacks": {"claude": ["gpt"]}})}, "orgs.acme.settings.fallbacks.claude[0]"),
    ({"orgs": org({"fallbacks": {"gpt": ["claude"]}})}, "orgs.acme.settings.fallbacks.gpt"),
    ({"orgs": org({"context_window_fallbacks": {"*": ["gpt"]}})}, "orgs.acme.settings.context_window_fallbacks.*[0]"),
    ({"orgs": org({"content_policy_fallbacks": ["gpt"]})}, "orgs.acme.settings.content_policy_fallbacks[0]"),
    ({"orgs": org({"plan_fallbacks": {"claude": ["gpt"]}})}, "orgs.acme.settings.plan_fallbacks.claude[0]"),
    (
        {"orgs": org({"policy": {"fallback": {"models": ["gpt"]}}})},
        "orgs.acme.settings.policy.fallback.models[0]",
    ),
    (
        {"orgs": org({"strategy": [{"name": "eco", "at_percent": 50, "model": "gpt"}]})},
        "orgs.acme.settings.strategy[0].model",
    ),
    (
        {"orgs": org({"strategy": [{"name": "eco", "at_percent": 50, "model": "claude", "fallback": "gpt"}]})},
        "orgs.acme.settings.strategy[0].fallback",
    ),
    ({"orgs": org({"reroutes": ["gpt"]}, "squad")}, "orgs.acme.squads.research.settings.reroutes[0]"),
    ({"orgs": org({"fallbacks": {"claude": ["gpt"]}}, "key")}, "orgs.acme.keys[0].settings.fallbacks.claude[0]"),
]


@pytest.mark.parametrize(("top", "path"), ONE_USE, ids=[path for _, path in ONE_USE])
def test_each_place_that_names_a_model_is_found_with_the_validations_path(top: dict[str, Any], path: str) -> None:
    file = config(**top)
    assert model_users(file, "gpt") == [path]
    assert model_users(file, "spare") == []
    without = {k: v for k, v in file.raw.models.items() if k != "gpt"}
    with pytest.raises(ConfigError):  # what the finder finds is what the file's rules refuse
        with_catalog(file, file.raw.providers, without)


def test_a_model_nothing_names_is_found_nowhere_and_the_rules_agree() -> None:
    settings = {"reroutes": ["custom:vllm:gpt"], "fallbacks": {"*": ["claude"]}}  # a custom entry is no catalog model
    file = config(orgs=org(settings))
    assert model_users(file, "gpt") == []
    without = {k: v for k, v in file.raw.models.items() if k != "gpt"}
    with_catalog(file, file.raw.providers, without)


def test_every_use_of_a_model_is_listed_in_file_order() -> None:
    settings = {"reroutes": ["gpt"], "fallbacks": {"gpt": ["claude"], "spare": ["gpt"]}}
    file = config(policy={"fallback": {"models": ["gpt"]}}, orgs=org(settings))
    assert model_users(file, "gpt") == [
        "policy.fallback.models[0]",
        "orgs.acme.settings.reroutes[0]",
        "orgs.acme.settings.fallbacks.gpt",
        "orgs.acme.settings.fallbacks.spare[0]",
    ]


def test_a_provider_is_named_by_the_offers_on_it_by_model_name_and_the_files_org_keys() -> None:
    file = config(orgs={"acme": {"provider_keys": {"west": "sk-acme-own-0001"}}})
    assert provider_users(file.raw.models, file.raw.orgs, "west") == [
        "models.claude.offers[0].provider",
        "models.gpt.offers[1].provider",
        "orgs.acme.provider_keys.west",
    ]
    assert provider_users(file.raw.models, file.raw.orgs, "north") == []


def test_the_refusal_names_the_thing_as_still_used_and_lists_what_uses_it() -> None:
    assert still_used("model", "demo-gpt", ["orgs.demo.settings.fallbacks.demo-claude[0]"]) == (
        "model `demo-gpt` is still used by: orgs.demo.settings.fallbacks.demo-claude[0]; remove those first"
    )
    users = [f"models.m{i}.offers[0].provider" for i in range(MAX_LISTED + 3)]
    message = still_used("provider", "sim-west", users)
    assert message.startswith("provider `sim-west` is still used by: models.m0.offers[0].provider, ")
    assert message.endswith(f"models.m{MAX_LISTED - 1}.offers[0].provider and 3 more; remove those first")
    assert f"m{MAX_LISTED}." not in message


def _stored(org_id: str, settings: dict[str, Any], *, squad: bool = False, key: bool = False) -> OrgDoc:
    """An org as stored in Redis (made through the admin API) with `settings` on it, a squad or a key."""
    scope = msgspec.convert(settings, ScopeSettings)
    return OrgDoc(
        id=org_id,
        settings=ScopeSettings() if squad or key else scope,
        squads={"lab": SquadDoc(settings=scope)} if squad else {},
        keys={"bot": KeyDoc(name="bot", digest="0" * 64, prefix="tk-refere", settings=scope)} if key else {},
    )


def test_orgs_stored_in_redis_and_in_no_file_name_models_too() -> None:
    file = config(orgs=org({"reroutes": ["gpt"]}))
    stored = {
        "acme": _stored("acme", {"fallbacks": ["gpt"]}),  # the file's org: its paths come from the file
        "beta": _stored("beta", {"reroutes": ["gpt"]}),
        "gamma": _stored("gamma", {"fallbacks": {"claude": ["gpt"]}}, squad=True),
        "delta": _stored("delta", {"content_policy_fallbacks": ["gpt"]}, key=True),
        "omega": _stored("omega", {"reroutes": ["claude"]}),
    }
    assert model_users(file, "gpt", stored) == [
        "orgs.acme.settings.reroutes[0]",
        "orgs.beta.settings.reroutes[0]",
        "orgs.delta.keys.bot.settings.content_policy_fallbacks[0]",
        "orgs.gamma.squads.lab.settings.fallbacks.claude[0]",
    ]
    assert model_users(file, "spare", stored) == []


def test_a_stored_orgs_own_key_for_a_provider_names_it() -> None:
    file = config()
    sealed = Vault([generate_key()]).seal("sk-beta-own-0001", Binding(org="beta", kind="provider_key", name="west"))
    stored = {
        "beta": msgspec.structs.replace(_stored("beta", {}), provider_keys={"west": ProviderKeyDoc(secret=sealed)})
    }
    assert provider_users(file.raw.models, file.raw.orgs, "west", stored)[-1] == "orgs.beta.provider_keys.west"
    assert provider_users(file.raw.models, file.raw.orgs, "east", stored) == [
        "models.gpt.offers[0].provider",
        "models.spare.offers[0].provider",
    ]
