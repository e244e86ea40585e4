"""The `limits` setting (SPEC §10): declared on org, squad and key, validated like the
other settings in the file and the admin API, and every scope's limits applied at once."""

from __future__ import annotations

import pytest

from turnout.config import parse_config
from turnout.core.limits import Limits, ScopeLimits
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList
from turnout.stored.orgs import KeyDoc, OrgDoc, SquadDoc
from turnout.tenancy.admin import AdminError, decode, settings_patch
from turnout.tenancy.bootstrap import merge_org
from turnout.tenancy.orgs import identity_of
from turnout.vault import Vault, generate_key

BASE = """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
models:
  m1: {offers: [{provider: a, model: m1}]}
"""


def test_limits_in_the_file_apply_from_every_scope_org_first_once_merged_into_the_store() -> None:
    config = parse_config(
        BASE
        + """
orgs:
  acme:
    settings: {limits: {rpm: 100}}
    squads: {r: {settings: {limits: {max_streams: 2}}}}
    keys:
      - {name: bot, key: tk-bot-0000001, squad: r, settings: {limits: {rpm: 10, max_tokens: 512}}}
      - {name: free, key: tk-free-000001}
""",
        env={},
    )
    doc, _ = merge_org(None, "acme", config.raw.orgs["acme"], config, Vault([generate_key()]), AllowList.parse(""), 0.0)
    assert doc is not None
    bot = identity_of(doc, doc.keys["bot"], config)
    assert bot.limits == (
        ScopeLimits(kind="org", org="acme", limits=Limits(rpm=100)),
        ScopeLimits(kind="squad", org="acme", id="r", limits=Limits(max_streams=2)),
        ScopeLimits(kind="key", org="acme", id="bot", limits=Limits(rpm=10, max_tokens=512)),
    )
    free = identity_of(doc, doc.keys["free"], config)
    assert [s.label for s in free.limits] == ["org acme"]


@pytest.mark.parametrize(
    ("limits", "path"),
    [
        ("{rpm: 0}", "orgs.acme.keys[0].settings.limits.rpm"),
        ("{tpm: -5}", "orgs.acme.keys[0].settings.limits.tpm"),
        ("{rps: 3}", "orgs.acme.keys[0].settings.limits.rps"),
        ("{max_n: 1.5}", "orgs.acme.keys[0].settings.limits.max_n"),
    ],
    ids=["zero", "negative", "unknown-field", "not-an-integer"],
)
def test_limits_invalid_in_the_file_is_refused_with_its_path(limits: str, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            BASE + f"orgs: {{acme: {{keys: [{{name: k, key: tk-k-00000001, settings: {{limits: {limits}}}}}]}}}}",
            env={},
        )
    assert str(info.value).startswith(path), str(info.value)


def test_limits_admin_patch_sets_and_refuses_with_the_path() -> None:
    current = ScopeSettings()
    patched = settings_patch(current, b'{"limits": {"rpm": 10, "max_concurrent": 3}}', "settings")
    assert patched.limits == Limits(rpm=10, max_concurrent=3)
    assert settings_patch(patched, b'{"limits": null}', "settings").limits == ScopeSettings().limits
    with pytest.raises(AdminError) as info:
        settings_patch(current, b'{"limits": {"max_tokens": 0}}', "settings")
    assert info.value.param == "settings.limits.max_tokens"
    with pytest.raises(AdminError):
        decode(b'{"limits": {"rpm": 2000000000}}', ScopeSettings, "settings")


def test_limits_identity_of_a_stored_key_carries_each_scope() -> None:
    config = parse_config(BASE, env={})
    key = KeyDoc(
        name="k", digest="0" * 64, prefix="tk-00000000", squad="sq", settings=ScopeSettings(limits=Limits(tpm=1000))
    )
    doc = OrgDoc(
        id="acme",
        settings=ScopeSettings(limits=Limits(max_concurrent=5)),
        squads={"sq": SquadDoc(settings=ScopeSettings())},
        keys={"k": key},
    )
    identity = identity_of(doc, key, config)
    assert [(s.label, s.limits) for s in identity.limits] == [
        ("org acme", Limits(max_concurrent=5)),
        ("key acme/k", Limits(tpm=1000)),
    ]
