"""BYOK in the shell: from the pure credential choice to a provider to call.

Owns: the ports through which the router reads a tenant's credentials
(`CredentialSource`, `TenantCredentials`; implemented by
`turnout.tenancy.directory.TenantDirectory` over Redis) and `resolve_call`, which
applies `turnout.core.credentials.credential_choices` and fetches the one
secret the attempt needs. Secrets stay inside the returned `ProviderConfig`
(the adapter's input); nothing here logs. A provider quoting the key back is
the scrubber's business (`turnout.scrub`, applied by the router).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from turnout.catalog import Catalog
from turnout.config import ProviderConfig, has_platform_credential
from turnout.core.credentials import Credential, credential_choices, is_custom_provider
from turnout.core.policy import Policy
from turnout.core.scopes import KeyMode
from turnout.core.types import Target


class TenantCredentials(Protocol):
    """One org's registered credentials, as the router needs them.

    Attributes:
        own_providers: providers the org registered a key for (no secrets).
    """

    own_providers: frozenset[str]

    def own_key(self, provider: str) -> str | None:
        """The org's key for `provider`, decrypted; None when absent or unreadable."""
        ...

    def endpoint(self, provider: str) -> ProviderConfig | None:
        """The custom endpoint behind provider name `custom:<org>:<id>`, with its key; None when unknown."""
        ...


class CredentialSource(Protocol):
    """Where the router finds an org's credentials (the job carries only the org id)."""

    def credentials(self, org: str) -> TenantCredentials | None:
        """The credentials of `org`, or None when it has none registered."""
        ...


class ResolvedCall(msgspec.Struct, frozen=True, kw_only=True):
    """How to call one target for one attempt.

    Attributes:
        provider: wire kind, base URL and the credential to send.
        credential: which credential that is.
        custom: a tenant custom endpoint (call it only through the
            SSRF-guarded client).
        may_fall_back: a 401/403 on this attempt may be retried once on the
            shared key (`turnout.core.loop.on_outcome(credential_fallback=)`).
    """

    provider: ProviderConfig
    credential: Credential
    custom: bool = False
    may_fall_back: bool = False


def resolve_call(
    catalog: Catalog,
    tenant: TenantCredentials | None,
    target: Target,
    *,
    key_mode: KeyMode,
    policy: Policy,
    byok_fallback: bool = False,
) -> ResolvedCall | None:
    """The provider and credential for one attempt on `target`, or None (NO_CREDENTIAL).

    Args:
        catalog: configured providers (their shared keys) and models.
        tenant: the requesting org's credentials, or None.
        target: the target attempted.
        key_mode: the resolved BYOK mode.
        policy: the policy in force (`fallback.credential_fallback`).
        byok_fallback: the tenant key was rejected on this target: use the
            credential after it (the shared key).
    """
    custom = is_custom_provider(target.provider)
    shared = None if custom else catalog.providers.get(target.provider)
    own_providers = tenant.own_providers if tenant is not None else frozenset()
    choices = credential_choices(
        key_mode=key_mode,
        provider=target.provider,
        own_providers=own_providers,
        model_providers=frozenset(t.provider for t in catalog.models.get(target.catalog_model, ())),
        shared_available=shared is not None and has_platform_credential(shared),
        credential_fallback=policy.fallback.credential_fallback,
    )
    if byok_fallback:
        choices = choices[1:]
    for i, choice in enumerate(choices):
        if choice is Credential.ENDPOINT:
            endpoint = tenant.endpoint(target.provider) if tenant is not None else None
            return None if endpoint is None else ResolvedCall(provider=endpoint, credential=choice, custom=True)
        if shared is None:
            return None
        if choice is Credential.SHARED:
            return ResolvedCall(provider=shared, credential=choice)
        key = tenant.own_key(target.provider) if tenant is not None else None
        if key:
            own = msgspec.structs.replace(shared, api_key=key)  # kind, base URL, API version kept
            return ResolvedCall(provider=own, credential=choice, may_fall_back=i + 1 < len(choices))
    return None
