"""Credentials: which key an attempt on a target may carry (SPEC §6 "BYOK").

Owns: the pure choice of credentials for one target from the tenant's
`key_mode`, the providers the tenant registered keys for, and whether the
platform (shared) key exists. The shell (`turnout.router`) looks up the
secrets; nothing here sees one.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.

Rules (SPEC §6, and the issue that made them precise):

- A tenant key is only ever sent to the provider it was registered for;
  a platform key is never sent to a tenant's custom endpoint, and a custom
  endpoint only ever gets its own key (or none).
- `shared_only`: the platform key, else nothing.
- `own_then_shared`: the tenant's key where it has one for this provider,
  else the platform key. With credential fallback, a tenant key is followed
  by the platform key, tried once if the tenant key is rejected (401/403).
- `own_only`: when the tenant has a key for any provider of the target's
  model, only the offers of those providers are eligible, on the tenant's
  key only (no credential fallback: "only" means only); when it has none
  for the model, the platform keys serve.
- No choice at all means NO_CREDENTIAL: the target is skipped, fallback-now,
  never counted against provider health (SPEC §3). The plan already leaves
  such targets out when it knows the org's keys (`turnout.core.plan.KeyFacts`),
  so an attempt meets NO_CREDENTIAL only for a key it cannot read, or when
  no offer of the request has a credential (the router then plans them all).
"""

from __future__ import annotations

import enum
from collections.abc import Set as AbstractSet

from turnout.core.scopes import KeyMode

DEFAULT_KEY_MODE: KeyMode = "own_then_shared"
"""The mode in force when no scope sets `key_mode`."""

CUSTOM_PREFIX = "custom:"
"""Provider names of tenant custom endpoints start with this (`custom:<org>:<id>`)."""


class Credential(enum.StrEnum):
    """One credential an attempt may carry."""

    OWN = "own"  # the tenant's key for this provider (BYOK)
    SHARED = "shared"  # the platform key configured in `providers:`
    ENDPOINT = "endpoint"  # a custom endpoint's own key (or no key)


def is_custom_provider(provider: str) -> bool:
    """True for the provider name of a tenant custom endpoint."""
    return provider.startswith(CUSTOM_PREFIX)


def credential_choices(
    *,
    key_mode: KeyMode,
    provider: str,
    own_providers: AbstractSet[str],
    model_providers: AbstractSet[str],
    shared_available: bool,
    credential_fallback: bool,
) -> tuple[Credential, ...]:
    """The ordered credentials an attempt on one target may use.

    Args:
        key_mode: the resolved BYOK mode (SPEC §6).
        provider: the target's provider name.
        own_providers: providers the tenant registered a key for.
        model_providers: providers of every offer of the target's catalog
            model (for `own_only`: "a key for any provider of the model").
        shared_available: the platform key of `provider` is configured.
        credential_fallback: the policy allows retrying a rejected tenant
            key once on the platform key (`fallback.credential_fallback`).

    Returns:
        The first entry is the credential of the first attempt; a second
        entry is the credential to fall back to after a 401/403 on the
        first. Empty: no usable credential (skip as NO_CREDENTIAL).
    """
    if is_custom_provider(provider):
        return (Credential.ENDPOINT,)
    shared = (Credential.SHARED,) if shared_available else ()
    own = provider in own_providers
    if key_mode == "shared_only":
        return shared
    if key_mode == "own_only":
        if own_providers & model_providers:
            return (Credential.OWN,) if own else ()
        return shared
    if own:
        return (Credential.OWN, *shared) if credential_fallback else (Credential.OWN,)
    return shared
