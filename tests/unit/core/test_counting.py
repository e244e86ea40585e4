"""Table tests for turnout.core.counting (SPEC §5 "What counts", "Not before")."""

from __future__ import annotations

import pytest

from turnout.core.breaker import Counted
from turnout.core.counting import Counting, count
from turnout.core.credentials import Credential
from turnout.core.types import FailureKind as K

OWN, SHARED, ENDPOINT = Credential.OWN, Credential.SHARED, Credential.ENDPOINT
S, F, N = Counted.SUCCESS, Counted.FAILURE, Counted.NEUTRAL


@pytest.mark.parametrize(
    ("kind", "credential", "hint", "expected"),
    [
        (K.SUCCESS, SHARED, None, Counting(target=S)),
        (K.SUCCESS, OWN, None, Counting(target=S, credential=S)),
        (K.SUCCESS, ENDPOINT, None, Counting(target=S, credential=S)),
        # provider failures count against the shared target, whatever the key
        (K.SERVER_ERROR, SHARED, None, Counting(target=F)),
        (K.SERVER_ERROR, OWN, None, Counting(target=F)),
        (K.OTHER_5XX, OWN, None, Counting(target=F)),
        (K.TRANSPORT, SHARED, None, Counting(target=F)),
        (K.TIMEOUT, SHARED, None, Counting(target=F)),
        (K.MALFORMED, SHARED, None, Counting(target=F)),
        (K.RATE_LIMITED, SHARED, None, Counting(target=F)),
        # a Retry-After is a "not before", not a failure
        (K.RATE_LIMITED, SHARED, 3600.0, Counting(rest_s=3600.0)),
        (K.SERVER_ERROR, SHARED, 2.0, Counting(rest_s=2.0)),
        (K.SERVER_ERROR, OWN, 2.0, Counting(rest_s=2.0)),
        (K.SERVER_ERROR, SHARED, 0.0, Counting(target=F)),
        (K.TIMEOUT, SHARED, 5.0, Counting(target=F)),
        # a tenant's own key: its failures are its own
        (K.AUTH, OWN, None, Counting(credential=F)),
        (K.QUOTA_EXHAUSTED, OWN, None, Counting(credential=F)),
        (K.RATE_LIMITED, OWN, None, Counting(credential=F)),
        (K.RATE_LIMITED, OWN, 30.0, Counting(credential=F)),
        (K.AUTH, ENDPOINT, None, Counting(credential=F)),
        # the platform key rejected: an operator alarm, never a breaker failure
        (K.AUTH, SHARED, None, Counting(alarm=True)),
        (K.QUOTA_EXHAUSTED, SHARED, None, Counting(alarm=True)),
        # never counted
        (K.CLIENT_ERROR, SHARED, None, Counting()),
        (K.CONTEXT_LENGTH, OWN, None, Counting()),
        (K.CONTENT_POLICY, SHARED, None, Counting()),
        (K.CANCELLED, SHARED, None, Counting()),
        (K.NO_CREDENTIAL, SHARED, None, Counting()),
    ],
)
def test_count_table(kind: K, credential: Credential, hint: float | None, expected: Counting) -> None:
    assert count(kind, credential=credential, retry_after_s=hint) == expected


@pytest.mark.parametrize("kind", list(K))
@pytest.mark.parametrize("credential", list(Credential))
def test_a_tenant_key_failure_never_counts_against_the_shared_target(kind: K, credential: Credential) -> None:
    counting = count(kind, credential=credential, retry_after_s=None)
    if kind in (K.AUTH, K.QUOTA_EXHAUSTED):
        assert counting.target is N
    if credential is Credential.SHARED:
        assert counting.credential is N
