"""The merge rule between the configuration file and run-time edits (README "Tenancy and keys")."""

from __future__ import annotations

import msgspec
import pytest

from turnout.config import Config, OrgConfig, parse_config
from turnout.core.limits import Limits
from turnout.core.scopes import ScopeSettings
from turnout.core.spend import Budget
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList
from turnout.stored.orgs import Ceiling, OrgDoc
from turnout.tenancy.admin import KeyCreate, add_key, remove_key, remove_squad, revoke_key, with_settings
from turnout.tenancy.bootstrap import merge_org
from turnout.tenancy.orgs import hash_token
from turnout.vault import Vault, generate_key, provider_key_binding

VAULT = Vault([generate_key()])
ALLOW = AllowList.parse("10.0.0.0/8").widened(schemes=["http"], ports=[8000])
BASE = """
providers:
  a: {{kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}}
models:
  m1: {{offers: [{{provider: a, model: m1}}]}}
  m2: {{offers: [{{provider: a, model: m2}}]}}
orgs:
  acme:
    settings: {{reroutes: [{reroute}]}}
    provider_keys: {{a: {byok}}}
    custom_endpoints: {{vllm: {{base_url: "{endpoint}", api_key: ep-secret-0001}}}}
    squads:
      research: {{settings: {{fallbacks: [m2]}}}}
    keys:
      - {{name: ci, squad: research, key: tk-ci-key-000000001}}
egress: {{schemes: [http], ports: [8000], allow: [10.0.0.0/8]}}   # as ALLOW: the file is checked at load too
"""


def cfg(reroute: str = "m1", byok: str = "byok-secret-0001", endpoint: str = "http://10.0.0.5:8000/v1") -> Config:
    return parse_config(BASE.format(reroute=reroute, byok=byok, endpoint=endpoint), env={})


def merge(current: OrgDoc | None, config: Config, now_s: float = 100.0) -> tuple[OrgDoc | None, list[str]]:
    return merge_org(current, "acme", config.raw.orgs["acme"], config, VAULT, ALLOW, now_s)


def first() -> OrgDoc:
    doc, _changed = merge(None, cfg())
    assert doc is not None
    return doc


def test_absent_org_is_created_from_the_file_with_secrets_sealed_and_keys_hashed() -> None:
    doc, changed = merge(None, cfg())
    assert doc is not None
    assert changed == ["settings", "squads.research", "keys.ci", "provider_keys.a", "custom_endpoints.vllm"]
    assert doc.keys["ci"].digest == hash_token("tk-ci-key-000000001")
    assert "tk-ci-key-000000001" not in msgspec.json.encode(doc).decode()
    assert "byok-secret-0001" not in msgspec.json.encode(doc).decode()
    assert VAULT.open(doc.provider_keys["a"].secret, provider_key_binding("acme", "a")) == "byok-secret-0001"
    assert all(m.origin == "config" for m in (doc.settings_meta, doc.keys["ci"].meta, doc.squads["research"].meta))


def test_restart_with_the_same_file_writes_nothing() -> None:
    doc = first()
    again, changed = merge(doc, cfg(), now_s=200.0)
    assert again is doc and changed == []


def test_file_change_updates_an_object_the_file_owns() -> None:
    doc = first()
    new, changed = merge(doc, cfg(reroute="m2", byok="byok-secret-0002"))
    assert changed == ["settings", "provider_keys.a"]
    assert new is not None and new.settings.reroutes == ["m2"]
    assert VAULT.open(new.provider_keys["a"].secret, provider_key_binding("acme", "a")) == "byok-secret-0002"


def test_run_time_edit_wins_over_a_later_file_change() -> None:
    doc = with_settings(first(), ("org", None), msgspec.convert({"reroutes": ["m1", "m2"]}, ScopeSettings), 150.0)
    new, changed = merge(doc, cfg(reroute="m2"))
    assert new is doc and changed == []
    assert doc.settings.reroutes == ["m1", "m2"]


def test_revoked_key_stays_revoked_across_restarts() -> None:
    doc = revoke_key(first(), "ci", 150.0)
    new, _changed = merge(doc, cfg())
    assert new is doc and new.keys["ci"].revoked_s == 150.0


def test_objects_deleted_at_run_time_are_not_recreated() -> None:
    doc = remove_key(first(), "ci")
    doc = remove_squad(doc, "research")
    new, changed = merge(doc, cfg(reroute="m2"))
    assert new is not None and "ci" not in new.keys and "research" not in new.squads
    assert changed == ["settings"]


def test_objects_removed_from_the_file_are_removed_but_the_apis_stay() -> None:
    doc, _ = add_key(first(), KeyCreate(name="own", squad="research"), "tk-api-made-key-0001", 150.0)
    slim = parse_config(
        """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
models:
  m1: {offers: [{provider: a, model: m1}]}
  m2: {offers: [{provider: a, model: m2}]}
orgs:
  acme: {}
""",
        env={},
    )
    new, changed = merge_org(doc, "acme", slim.raw.orgs["acme"], slim, VAULT, ALLOW, 300.0)
    assert new is not None and set(new.keys) == {"own"} and not new.custom_endpoints and not new.provider_keys
    assert set(new.squads) == {"research"}  # a key the API made still belongs to it
    assert changed == [
        "settings",
        "keys.ci (removed: no longer in the file)",
        "provider_keys.a (removed: no longer in the file)",
        "custom_endpoints.vllm (removed: no longer in the file)",
    ]


def test_endpoint_refused_by_the_ssrf_guard_refuses_the_start_naming_the_path() -> None:
    with pytest.raises(ConfigError, match=r"^orgs\.acme\.custom_endpoints\.vllm\.base_url: refused: .*metadata"):
        merge(None, cfg(endpoint="http://169.254.169.254:8000/v1"))


def test_byok_without_a_secret_key_refuses_the_start_naming_the_path() -> None:
    config = cfg()
    with pytest.raises(ConfigError, match=r"^orgs\.acme\.provider_keys\.a: TURNOUT_SECRET_KEY is not set"):
        merge_org(None, "acme", config.raw.orgs["acme"], config, Vault([]), ALLOW, 1.0)


def test_duplicate_key_names_in_one_org_are_refused() -> None:
    """Refused by `turnout config check` already (not only at the ingress's start)."""
    with pytest.raises(ConfigError, match=r"^orgs\.acme\.keys\[1\]\.name: key name 'ci' is used twice"):
        parse_config(
            """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
models:
  m1: {offers: [{provider: a, model: m1}]}
orgs:
  acme:
    keys:
      - {name: ci, key: tk-one-000000001}
      - {name: ci, key: tk-two-000000001}
""",
            env={},
        )


def test_the_files_limits_and_budgets_are_the_operators_ceilings() -> None:
    text = BASE.format(reroute="m1", byok="byok-secret-0001", endpoint="http://10.0.0.5:8000/v1")
    text = text.replace(
        "settings: {reroutes: [m1]}", "settings: {reroutes: [m1], limits: {rpm: 3}, budget: {usd: 1, period: day}}"
    ).replace("research: {settings: {fallbacks: [m2]}}", "research: {settings: {limits: {rpm: 5}}}")
    doc, _ = merge_org(
        None, "acme", parse_config(text, env={}).raw.orgs["acme"], parse_config(text, env={}), VAULT, ALLOW, 1.0
    )
    assert doc is not None
    assert doc.ceilings["org"].limits == Limits(rpm=3) and doc.ceilings["org"].budget == Budget(usd=1.0, period="day")
    assert doc.ceilings["squads.research"] == Ceiling(limits=Limits(rpm=5)) and "keys.ci" not in doc.ceilings


def test_every_error_of_a_merged_orgs_settings_is_named_from_the_files_root() -> None:
    config = parse_config(
        """
providers:
  a: {kind: openai, base_url: "https://a.example/v1", api_key: k}
models:
  m: {offers: [{provider: a, model: m}]}
""",
        env={},
    )
    org = OrgConfig(settings=ScopeSettings(reroutes=["nope"], fallbacks={"m": ["gone"]}))
    with pytest.raises(ConfigError) as info:
        merge_org(None, "acme", org, config, VAULT, ALLOW, 0.0)
    assert info.value.errors == [
        "orgs.acme.settings.reroutes[0]: unknown model 'nope' (not in `models`)",
        "orgs.acme.settings.fallbacks.m[0]: unknown model 'gone' (not in `models`)",
    ]
    assert str(info.value).splitlines() == info.value.errors
