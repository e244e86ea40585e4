"""Credential choice per target (SPEC §6 BYOK): key_mode x tenant keys x shared key, as a table."""

from __future__ import annotations

import pytest

from turnout.core.credentials import Credential, credential_choices, is_custom_provider

OWN, SHARED, ENDPOINT = Credential.OWN, Credential.SHARED, Credential.ENDPOINT

# (key_mode, target provider, tenant's providers, model's providers, shared key?, credential fallback?, expected)
CASES = [
    # own_then_shared: own key where it has one, else shared; the shared key may follow a rejected own key
    ("own_then_shared", "openai", {"openai"}, {"openai", "azure"}, True, True, (OWN, SHARED)),
    ("own_then_shared", "openai", {"openai"}, {"openai", "azure"}, True, False, (OWN,)),
    ("own_then_shared", "openai", {"openai"}, {"openai"}, False, True, (OWN,)),
    ("own_then_shared", "azure", {"openai"}, {"openai", "azure"}, True, True, (SHARED,)),
    ("own_then_shared", "azure", {"openai"}, {"openai", "azure"}, False, True, ()),
    ("own_then_shared", "openai", set(), {"openai"}, True, True, (SHARED,)),
    ("own_then_shared", "openai", set(), {"openai"}, False, True, ()),
    # own_only: a key for any provider of the model makes only those offers eligible, own key only
    ("own_only", "openai", {"openai"}, {"openai", "azure"}, True, True, (OWN,)),
    ("own_only", "azure", {"openai"}, {"openai", "azure"}, True, True, ()),
    ("own_only", "openai", {"groq"}, {"openai", "azure"}, True, True, (SHARED,)),
    ("own_only", "openai", {"groq"}, {"openai", "azure"}, False, True, ()),
    ("own_only", "openai", set(), {"openai"}, True, False, (SHARED,)),
    # shared_only: the tenant's keys are never used
    ("shared_only", "openai", {"openai"}, {"openai"}, True, True, (SHARED,)),
    ("shared_only", "openai", {"openai"}, {"openai"}, False, True, ()),
    ("shared_only", "azure", set(), {"azure"}, True, False, (SHARED,)),
    # a custom endpoint only ever gets its own key, in every mode
    ("own_then_shared", "custom:acme:vllm", {"openai"}, set(), True, True, (ENDPOINT,)),
    ("own_only", "custom:acme:vllm", {"openai"}, set(), True, True, (ENDPOINT,)),
    ("shared_only", "custom:acme:vllm", set(), set(), True, True, (ENDPOINT,)),
]
IDS = [
    "ots-own-then-shared-fallback",
    "ots-own-no-credential-fallback",
    "ots-own-no-shared",
    "ots-other-provider-uses-shared",
    "ots-other-provider-no-shared",
    "ots-no-tenant-key-shared",
    "ots-nothing",
    "oo-own",
    "oo-other-offer-ineligible",
    "oo-no-key-for-model-shared",
    "oo-no-key-for-model-no-shared",
    "oo-no-tenant-keys",
    "so-ignores-own",
    "so-no-shared",
    "so-shared",
    "custom-ots",
    "custom-oo",
    "custom-so",
]


@pytest.mark.parametrize(("mode", "provider", "own", "model", "shared", "fallback", "expected"), CASES, ids=IDS)
def test_credential_choices_table(
    mode: str,
    provider: str,
    own: set[str],
    model: set[str],
    shared: bool,
    fallback: bool,
    expected: tuple[Credential, ...],
) -> None:
    got = credential_choices(
        key_mode=mode,  # type: ignore[arg-type]
        provider=provider,
        own_providers=frozenset(own),
        model_providers=frozenset(model),
        shared_available=shared,
        credential_fallback=fallback,
    )
    assert got == expected


@pytest.mark.parametrize("mode", ["own_then_shared", "own_only", "shared_only"])
@pytest.mark.parametrize("provider", ["openai", "azure", "custom:acme:x"])
def test_tenant_key_only_ever_goes_to_its_own_provider(mode: str, provider: str) -> None:
    got = credential_choices(
        key_mode=mode,  # type: ignore[arg-type]
        provider=provider,
        own_providers=frozenset({"groq"}),
        model_providers=frozenset({"openai", "azure", "groq"}),
        shared_available=True,
        credential_fallback=True,
    )
    assert OWN not in got


@pytest.mark.parametrize("mode", ["own_then_shared", "own_only", "shared_only"])
def test_shared_key_never_goes_to_a_custom_endpoint(mode: str) -> None:
    got = credential_choices(
        key_mode=mode,  # type: ignore[arg-type]
        provider="custom:acme:vllm",
        own_providers=frozenset({"custom:acme:vllm"}),
        model_providers=frozenset(),
        shared_available=True,
        credential_fallback=True,
    )
    assert got == (ENDPOINT,)


def test_custom_provider_names_are_recognised() -> None:
    assert is_custom_provider("custom:acme:vllm")
    assert not is_custom_provider("openai")
