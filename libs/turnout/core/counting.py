"""What one attempt's result counts against (SPEC §5 "What counts", "Not before").

Owns: the pure decision, for one classified outcome and the credential it
carried, of how it counts for the shared (provider, model) breaker and
health, for the tenant's credential health (org, provider), whether it
carries a fleet-wide "not before", and whether it is an operator alarm.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.

Rules:
- Provider failures (5xx, 529, transport, timeouts, malformed answers, rate
  limits on the platform key) count against the target.
- A 429 or 5xx carrying a Retry-After sets the target's "not before" instead
  of counting as a failure: the provider said when to come back.
- Failures of a tenant's own key (401/403, quota, its account's 429) count
  against that tenant's credential only, never against the shared target.
- The platform key rejected (401/403) or out of quota is an operator alarm:
  logged and counted, not a reason to shut the model for every tenant.
- Client errors, cancellations and missing credentials count nowhere.
"""

from __future__ import annotations

import msgspec

from turnout.core.breaker import Counted
from turnout.core.credentials import Credential
from turnout.core.types import FailureKind

_PROVIDER_FAILURES = frozenset(
    {FailureKind.SERVER_ERROR, FailureKind.OTHER_5XX, FailureKind.TRANSPORT, FailureKind.TIMEOUT, FailureKind.MALFORMED}
)
_CREDENTIAL_FAILURES = frozenset({FailureKind.AUTH, FailureKind.QUOTA_EXHAUSTED})
_HINTED = frozenset({FailureKind.RATE_LIMITED, FailureKind.SERVER_ERROR})


class Counting(msgspec.Struct, frozen=True, kw_only=True):
    """How one result counts.

    Attributes:
        target: for the shared (provider, model) breaker and health score.
        credential: for the tenant's credential health (NEUTRAL for the
            platform key, which has none).
        rest_s: a provider's Retry-After to keep fleet-wide as the target's
            "not before", seconds, or None.
        alarm: the platform key was rejected or is out of quota.
    """

    target: Counted = Counted.NEUTRAL
    credential: Counted = Counted.NEUTRAL
    rest_s: float | None = None
    alarm: bool = False


def count(kind: FailureKind, *, credential: Credential, retry_after_s: float | None) -> Counting:
    """How an attempt of `kind`, made with `credential`, counts (module rules).

    Args:
        kind: the classified outcome (CANCELLED and NO_CREDENTIAL too).
        credential: the credential the attempt carried: OWN (a tenant's BYOK
            key), ENDPOINT (a tenant's custom endpoint key) or SHARED.
        retry_after_s: the hint of this response in seconds, or None.

    Returns:
        The `Counting`. Never raises.
    """
    tenant_owned = credential is not Credential.SHARED
    if kind is FailureKind.SUCCESS:
        return Counting(target=Counted.SUCCESS, credential=Counted.SUCCESS if tenant_owned else Counted.NEUTRAL)
    if kind in _CREDENTIAL_FAILURES:
        if tenant_owned:
            return Counting(credential=Counted.FAILURE)
        return Counting(alarm=True)
    if kind is FailureKind.RATE_LIMITED and credential is Credential.OWN:
        return Counting(credential=Counted.FAILURE)  # the tenant's own account limit
    if kind in _HINTED and retry_after_s is not None and retry_after_s > 0:
        return Counting(rest_s=retry_after_s)
    if kind in _PROVIDER_FAILURES or kind is FailureKind.RATE_LIMITED:
        return Counting(target=Counted.FAILURE)
    return Counting()
