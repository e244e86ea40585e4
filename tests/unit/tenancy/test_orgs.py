"""Org documents: scope resolution org > squad > key into a key's identity, validation with paths, clamping."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from turnout.config import parse_config
from turnout.core.scopes import ScopeSettings
from turnout.core.types import Target
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList
from turnout.stored.orgs import EndpointDoc, KeyDoc, OrgDoc, SquadDoc
from turnout.tenancy.admin import AdminError, decode, settings_patch
from turnout.tenancy.orgs import (
    clamp_settings,
    hash_token,
    identity_of,
    lookup_prefix,
    new_gateway_key,
    references,
    validate_org,
)

CONFIG = parse_config(
    """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
  b: {kind: openai_compatible, base_url: "https://b.example/v1", api_key: kb}
models:
  m1: {offers: [{provider: a, model: m1}]}
  m2: {offers: [{provider: b, model: m2}]}
  m3: {offers: [{provider: a, model: m3}, {provider: b, model: m3}]}
policy: {budget: {max_attempts: 5}}
ceilings: {max_attempts: 5, max_retries: 3}
""",
    env={},
)


def s(**fields: Any) -> ScopeSettings:
    return msgspec.convert(fields, ScopeSettings)


def doc(
    org: ScopeSettings = ScopeSettings(),
    squad: ScopeSettings | None = None,
    key: ScopeSettings = ScopeSettings(),
    endpoints: dict[str, str] | None = None,
) -> tuple[OrgDoc, KeyDoc]:
    k = KeyDoc(name="k", digest="0" * 64, prefix="tk-00000000", squad="sq" if squad is not None else None, settings=key)
    d = OrgDoc(
        id="acme",
        settings=org,
        squads={"sq": SquadDoc(settings=squad)} if squad is not None else {},
        keys={"k": k},
        custom_endpoints={n: EndpointDoc(base_url=u) for n, u in (endpoints or {}).items()},
    )
    return d, k


# (org, squad, key) settings -> expected (reroutes, fallbacks["*"], key_mode, max_attempts)
RESOLUTION = [
    (s(), None, s(), ((), None, "own_then_shared", 5)),
    (s(reroutes=["m1"]), s(reroutes=["m2"]), s(reroutes=["m3"]), (("m1",), None, "own_then_shared", 5)),
    (s(), s(reroutes=["m2"]), s(reroutes=["m3"]), (("m2",), None, "own_then_shared", 5)),
    (s(), s(), s(reroutes=["m3"]), (("m3",), None, "own_then_shared", 5)),
    (s(), None, s(reroutes=["m3"]), (("m3",), None, "own_then_shared", 5)),
    (s(key_mode="shared_only"), s(key_mode="own_only"), s(key_mode="own_then_shared"), ((), None, "shared_only", 5)),
    (s(), s(key_mode="own_only"), s(key_mode="shared_only"), ((), None, "own_only", 5)),
    (s(fallbacks=["m2"]), s(reroutes=["m3"]), s(key_mode="own_only"), (("m3",), ("m2",), "own_only", 5)),
    (
        s(policy={"budget": {"max_attempts": 2}}),
        s(policy={"budget": {"max_attempts": 3}}),
        s(),
        ((), None, "own_then_shared", 2),
    ),
    (
        s(),
        s(policy={"budget": {"max_attempts": 3}}),
        s(policy={"budget": {"max_attempts": 4}}),
        ((), None, "own_then_shared", 3),
    ),
    (s(), s(), s(policy={"budget": {"max_attempts": 99}}), ((), None, "own_then_shared", 5)),
    (s(), s(fallbacks={"*": ["m1"]}), s(fallbacks=["m2"]), ((), ("m1",), "own_then_shared", 5)),
]
RESOLUTION_IDS = [
    "nothing-set-defaults",
    "org-wins",
    "squad-over-key",
    "key-when-alone",
    "key-without-squad",
    "key-mode-org-wins",
    "key-mode-squad-wins",
    "per-setting-independent",
    "policy-org-wins-whole",
    "policy-squad-over-key",
    "policy-clamped-to-ceiling",
    "fallbacks-squad-over-key",
]


@pytest.mark.parametrize(("org", "squad", "key", "expected"), RESOLUTION, ids=RESOLUTION_IDS)
def test_identity_resolves_each_setting_org_over_squad_over_key(
    org: ScopeSettings,
    squad: ScopeSettings | None,
    key: ScopeSettings,
    expected: tuple[Any, ...],
) -> None:
    d, k = doc(org, squad, key)
    identity = identity_of(d, k, CONFIG)
    reroutes, fallbacks, key_mode, max_attempts = expected
    assert identity.settings.reroutes == reroutes
    assert identity.settings.fallbacks.get("*") == fallbacks
    assert identity.settings.key_mode == key_mode
    assert identity.policy.budget.max_attempts == max_attempts
    assert (identity.org, identity.key, identity.squad) == ("acme", "k", k.squad)


def test_custom_entries_become_org_scoped_targets() -> None:
    d, k = doc(
        s(reroutes=["custom:vllm:llama3:8b"], fallbacks={"m1": ["custom:vllm:small"]}),
        endpoints={"vllm": "https://vllm.example/v1"},
    )
    targets = identity_of(d, k, CONFIG).settings.custom_targets
    assert targets == {
        "custom:vllm:llama3:8b": Target(
            provider="custom:acme:vllm", model="llama3:8b", catalog_model="custom:vllm:llama3:8b"
        ),
        "custom:vllm:small": Target(provider="custom:acme:vllm", model="small", catalog_model="custom:vllm:small"),
    }
    assert references(d, "custom:vllm:") == ["settings.reroutes", "settings.fallbacks"]


INVALID = [
    (dict(org=s(reroutes=["nope"])), "settings.reroutes[0]", "unknown model"),
    (dict(squad=s(fallbacks={"m1": ["m2"], "m2": ["m1"]})), "squads.sq.settings.fallbacks", "fallback cycle"),
    (dict(key=s(reroutes=["custom:vllm"])), "keys.k.settings.reroutes[0]", "malformed entry"),
    (dict(key=s(reroutes=["custom:other:llama"])), "keys.k.settings.reroutes[0]", "names no custom endpoint"),
    (dict(endpoints={"vllm": "https://169.254.169.254/"}), "custom_endpoints.vllm.base_url", "metadata"),
    (dict(endpoints={"bad:id": "https://x.example/v1"}), "custom_endpoints.bad:id", "cannot contain"),
]


@pytest.mark.parametrize(
    ("parts", "path", "what"),
    INVALID,
    ids=["unknown-model", "cycle", "malformed-custom", "other-org-endpoint", "endpoint-ssrf", "endpoint-id-colon"],
)
def test_validate_org_names_the_offending_path(parts: dict[str, Any], path: str, what: str) -> None:
    d, _ = doc(**{"endpoints": {"vllm": "https://vllm.example/v1"}, **parts})
    with pytest.raises(ConfigError) as info:
        validate_org(d, CONFIG, AllowList())
    assert str(info.value).startswith(f"{path}: ") or str(info.value).startswith(f"{path}:")
    assert what in str(info.value)


def test_an_unknown_policy_field_is_refused_when_settings_are_decoded_naming_its_path() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"unknown field `bogus` - at `\$\.policy\.retry`"):
        s(policy={"retry": {"bogus": 1}})
    with pytest.raises(AdminError) as info:
        decode(b'{"policy": {"retry": {"bogus": 1}}}', ScopeSettings, "settings")
    assert info.value.param == "settings.policy.retry.bogus" and "unknown field" in info.value.message
    with pytest.raises(AdminError) as info:
        decode(b'{"policy": {"retry": {"max_retrie": 1}}}', ScopeSettings, "settings")
    assert info.value.message.endswith("unknown field `max_retrie` (did you mean `max_retries`?)")


def test_validate_org_refuses_unknown_byok_provider_and_unknown_squad() -> None:
    d, k = doc()
    from turnout.stored.orgs import ProviderKeyDoc
    from turnout.vault import Sealed

    bad = msgspec.structs.replace(d, provider_keys={"zzz": ProviderKeyDoc(secret=Sealed(token="t", tail=""))})
    with pytest.raises(ConfigError, match="^provider_keys.zzz: unknown provider"):
        validate_org(bad, CONFIG, AllowList())
    bad = msgspec.structs.replace(d, keys={"k": msgspec.structs.replace(k, squad="ghost")})
    with pytest.raises(ConfigError, match="^keys.k.squad: unknown squad"):
        validate_org(bad, CONFIG, AllowList())


def test_a_provider_key_held_before_its_provider_left_the_catalog_does_not_block_later_writes() -> None:
    from turnout.stored.orgs import ProviderKeyDoc
    from turnout.vault import Sealed

    d, k = doc()
    stale = {"gone": ProviderKeyDoc(secret=Sealed(token="t", tail=""))}  # "gone" is not in CONFIG's providers
    stored = msgspec.structs.replace(d, provider_keys=stale)
    revoked = msgspec.structs.replace(stored, keys={"k": msgspec.structs.replace(k, revoked_s=1.0)})
    validate_org(revoked, CONFIG, AllowList(), previous=stored)  # e.g. revoking a gateway key
    added = {**stale, "zzz": ProviderKeyDoc(secret=Sealed(token="t", tail=""))}
    with pytest.raises(ConfigError, match="^provider_keys.zzz: unknown provider"):  # a new one still is refused
        validate_org(msgspec.structs.replace(stored, provider_keys=added), CONFIG, AllowList(), previous=stored)
    with pytest.raises(ConfigError, match="^provider_keys.gone: unknown provider"):  # and with no stored document
        validate_org(stored, CONFIG, AllowList())


def test_a_stored_policy_over_a_ceiling_is_clamped_not_refused() -> None:
    d, _ = doc(org=s(policy={"budget": {"max_attempts": 50}}))
    validate_org(d, CONFIG, AllowList())


def test_clamp_settings_reports_each_clamped_field_with_its_path() -> None:
    clamped, clamps = clamp_settings(
        s(policy={"retry": {"max_retries": 9}, "budget": {"max_attempts": 50}}), CONFIG, "squads.sq.settings"
    )
    assert msgspec.to_builtins(clamped.policy) == {"retry": {"max_retries": 3}, "budget": {"max_attempts": 5}}
    assert [(c.path, c.requested, c.applied) for c in clamps] == [
        ("squads.sq.settings.policy.retry.max_retries", 9, 3),
        ("squads.sq.settings.policy.budget.max_attempts", 50, 5),
    ]


def test_generated_gateway_keys_are_prefixed_long_and_distinct() -> None:
    keys = {new_gateway_key() for _ in range(200)}
    assert len(keys) == 200
    for key in keys:
        assert key.startswith("tk-") and len(key) == 3 + 32  # 24 random bytes = 192 bits
        assert lookup_prefix(key) == key[:11]
        assert len(hash_token(key)) == 64 and key not in hash_token(key)


def test_an_admin_error_never_repeats_a_huge_value_whole() -> None:
    with pytest.raises(AdminError) as info:
        decode(b'{"key_mode": "' + b"a" * 100_000 + b'"}', ScopeSettings, "settings")
    assert info.value.param == "settings.key_mode"
    assert len(info.value.message) < 400 and "(100000 characters)" in info.value.message
    long_name = "p" * 5000
    error = AdminError(400, f"provider_keys.{long_name}: unknown provider", code="invalid_value", param=long_name)
    assert error.message.endswith("… (5000 characters): unknown provider")
    assert error.param is not None and len(error.param) < 250
    short = AdminError(400, "keys.k.squad: unknown squad 'ghost'", code="invalid_value", param="keys.k.squad")
    assert short.message == "keys.k.squad: unknown squad 'ghost'" and short.param == "keys.k.squad"  # untouched


@pytest.mark.parametrize(
    ("body", "param", "hint"),
    [
        (b'{"reroute": {}}', "settings.reroute", "(did you mean `reroutes`?)"),
        (b'{"limit": {}}', "settings.limit", "(did you mean `limits`?)"),
        (b'{"zzz": 1}', "settings.zzz", "(known: "),
    ],
)
def test_a_patch_naming_an_unknown_setting_offers_the_close_one(body: bytes, param: str, hint: str) -> None:
    with pytest.raises(AdminError) as info:
        settings_patch(ScopeSettings(), body, "settings")
    assert info.value.param == param and hint in info.value.message
