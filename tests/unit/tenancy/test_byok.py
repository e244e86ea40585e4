"""From credential choice to the key an attempt carries (SPEC §6): tenant keys stay on their provider,
platform keys never reach a custom endpoint."""

from __future__ import annotations

import pytest

from turnout.catalog import Catalog
from turnout.config import ProviderConfig, parse_config
from turnout.core.credentials import Credential
from turnout.core.policy import Policy, merge_policy
from turnout.core.types import Target
from turnout.tenancy.byok import resolve_call

CATALOG = Catalog(
    parse_config(
        """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: shared-a}
  b: {kind: openai_compatible, base_url: "https://b.example/v1", api_key: shared-b}
  c: {kind: openai_compatible, base_url: "https://c.example/v1"}
models:
  m: {offers: [{provider: a, model: m}, {provider: b, model: m}, {provider: c, model: m}]}
""",
        env={},
    )
)
TA, TB, TC = (Target(provider=p, model="m", catalog_model="m") for p in "abc")
CUSTOM = Target(provider="custom:acme:vllm", model="llama", catalog_model="custom:vllm:llama")


class Tenant:
    """Fake `TenantCredentials`."""

    def __init__(self, keys: dict[str, str], endpoint: ProviderConfig | None = None) -> None:
        self.keys = keys
        self.own_providers = frozenset(keys)
        self._endpoint = endpoint
        self.asked: list[str] = []

    def own_key(self, provider: str) -> str | None:
        self.asked.append(provider)
        return self.keys.get(provider)

    def endpoint(self, provider: str) -> ProviderConfig | None:
        return self._endpoint if provider == "custom:acme:vllm" else None


ENDPOINT = ProviderConfig(kind="openai_compatible", base_url="https://vllm.example/v1", api_key="ep-key")


@pytest.mark.parametrize(
    ("mode", "target", "byok", "expected"),
    [
        ("own_then_shared", TA, False, ("own-a", Credential.OWN, True)),
        ("own_then_shared", TA, True, ("shared-a", Credential.SHARED, False)),
        ("own_then_shared", TB, False, ("shared-b", Credential.SHARED, False)),
        ("own_then_shared", TC, False, None),
        ("own_only", TA, False, ("own-a", Credential.OWN, False)),
        ("own_only", TB, False, None),
        ("shared_only", TA, False, ("shared-a", Credential.SHARED, False)),
        ("own_then_shared", CUSTOM, False, ("ep-key", Credential.ENDPOINT, False)),
        ("shared_only", CUSTOM, False, ("ep-key", Credential.ENDPOINT, False)),
    ],
    ids=[
        "ots-own",
        "ots-byok-fallback",
        "ots-other-provider",
        "ots-nothing",
        "oo-own",
        "oo-ineligible",
        "so-shared",
        "custom",
        "custom-shared-only",
    ],
)
def test_resolve_call_picks_the_key(
    mode: str, target: Target, byok: bool, expected: tuple[str, Credential, bool] | None
) -> None:
    tenant = Tenant({"a": "own-a"}, ENDPOINT)
    call = resolve_call(CATALOG, tenant, target, key_mode=mode, policy=Policy(), byok_fallback=byok)  # type: ignore[arg-type]
    if expected is None:
        assert call is None
        return
    assert call is not None
    assert (call.provider.api_key, call.credential, call.may_fall_back) == expected
    assert call.custom is (target is CUSTOM)
    if target is not CUSTOM:
        assert call.provider.base_url == CATALOG.providers[target.provider].base_url
    assert all(p == "a" for p in tenant.asked)  # the tenant's key store is only asked for the target's provider


def test_without_credential_fallback_a_rejected_own_key_has_nothing_after_it() -> None:
    policy = merge_policy(Policy(), {"fallback": {"credential_fallback": False}})
    call = resolve_call(CATALOG, Tenant({"a": "own-a"}), TA, key_mode="own_then_shared", policy=policy)
    assert call is not None and not call.may_fall_back
    assert (
        resolve_call(CATALOG, Tenant({"a": "own-a"}), TA, key_mode="own_then_shared", policy=policy, byok_fallback=True)
        is None
    )


def test_unreadable_own_key_falls_to_the_shared_key_under_own_then_shared() -> None:
    tenant = Tenant({"a": ""})
    call = resolve_call(CATALOG, tenant, TA, key_mode="own_then_shared", policy=Policy())
    assert call is not None and call.credential is Credential.SHARED


def test_no_tenant_means_shared_keys_and_no_custom_endpoints() -> None:
    call = resolve_call(CATALOG, None, TA, key_mode="own_only", policy=Policy())
    assert call is not None and call.provider.api_key == "shared-a"
    assert resolve_call(CATALOG, None, CUSTOM, key_mode="own_then_shared", policy=Policy()) is None
