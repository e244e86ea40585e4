"""One count-tokens call to one offer: its breaker, its gate and its attempt record (issue #40).

Owns: the rule that keeps counting apart from chat in breaker health, and the record of
each count call.

- **Its own breaker.** A count call is gated by and counted against a breaker subject of
  its own per (provider, model, operation): `count_subject` (`<target key>#count_tokens`),
  with the same thresholds, states (closed / open / half-open with one probe) and "not
  before" as a model call's (`turnout.health`: `TargetGate.admit`, `ResultWriter.record`,
  the same what-counts rule, `turnout.core.counting`). A failing count endpoint therefore
  opens only the count breaker: chat on the same offer stays closed. The other way round a
  chat breaker out of rotation keeps counts off the offer too (`tokens.resting`): the
  provider is down for both. A tenant's own key's 401/403 or quota counts nowhere (as a
  model call's does not count against the shared target) and leaves the tenant's chat
  credential health alone.
- **Its record.** Each call is an ended attempt row in the attempt records
  (`turnout.observability.records.attempt_row`), with `operation: count_tokens` and the
  counted tokens in `counted_tokens`; `input_tokens`, `output_tokens` and `cost_usd` are 0
  (counting uses no model tokens and costs nothing), so spend and exports are unchanged.
  The dashboard lists it with its request id like any request, its attempts under it.
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from turnout.adapters.base import Usage
from turnout.adapters.token_counts import CountAttempt
from turnout.core.classify import classify, disposition
from turnout.core.plan import PlanEntry
from turnout.core.steps import AttemptRecord
from turnout.core.types import FailureKind, Outcome
from turnout.health import HealthView
from turnout.health.gate import Gate
from turnout.observability.records import attempt_row
from turnout.router.request import RequestInfo
from turnout.tenancy.byok import ResolvedCall
from turnout.tenancy.identity import Identity

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

COUNT_OPERATION: Final = "count_tokens"
"""The operation a count call's breaker subject and record name."""


def count_subject(target_key: str) -> str:
    """The breaker subject of count calls to the offer `target_key` (module doc): its own, so
    count failures never open the offer's chat breaker."""
    return f"{target_key}#{COUNT_OPERATION}"


def _error(outcome: Outcome) -> str:
    """A short description of a failed count for the breaker (no provider text)."""
    what = f"HTTP {outcome.status}" if outcome.status is not None else str(outcome.transport)
    return f"count_tokens failed: {what}"


class CountCall:
    """The count calls of one `POST /v1/messages/count_tokens` request, in plan order.

    Args:
        state: the ingress (its breakers, catalog and attempt records).
        identity: the caller.
        request_id: the request's id (the records').
        model: the requested model.
    """

    def __init__(self, state: IngressState, identity: Identity, request_id: str, model: str) -> None:
        self._state = state
        self._info = RequestInfo(
            request_id=request_id, org=identity.org, squad=identity.squad, key=identity.key, requested_model=model
        )
        self._number = 0

    async def view(self, entries: list[PlanEntry]) -> HealthView:
        """The count breakers of `entries`, in one read."""
        return await self._state.breakers.reads.view([count_subject(e.target.key) for e in entries])

    async def admit(self, entry: PlanEntry, view: HealthView) -> Gate:
        """Whether a count may go to `entry` now: not admitted when its count breaker keeps it
        off (open, half-open with its probe taken, inside a "not before"); admitted with the
        probe permit of a half-open breaker's one probe (give it back with `ended`)."""
        return await self._state.breakers.gate.admit(count_subject(entry.target.key), view)

    async def ended(
        self, entry: PlanEntry, call: ResolvedCall, attempt: CountAttempt, view: HealthView, probe: str | None
    ) -> None:
        """Count `attempt` for its breaker (giving back `probe`) and write its attempt record.
        A call that said nothing of the provider (`attempt.outcome` None) only gives the probe back."""
        outcome = attempt.outcome
        kind = classify(outcome) if outcome is not None else FailureKind.CLIENT_ERROR
        if outcome is not None or probe is not None:
            await self._state.breakers.results.record(
                count_subject(entry.target.key),
                kind,
                probe_token=probe,
                error="" if kind is FailureKind.SUCCESS or outcome is None else _error(outcome),
                view=view,
                credential=call.credential,
                retry_after_s=outcome.retry_after_s if outcome is not None else None,
            )
        records = self._state.obs.records
        if outcome is None or records is None:
            return
        self._number += 1
        record = AttemptRecord(
            number=self._number,
            target=entry.target,
            role=entry.role,
            is_retry=False,
            is_fallback=entry.is_fallback,
            is_reroute=entry.is_reroute,
            resend_count=0,
            cycle=1,
            kind=kind,
            disposition=disposition(kind),
            status=outcome.status,
            error_code=outcome.error_code,
            error_type=outcome.error_type,
            message="",
            retry_after_s=outcome.retry_after_s,
            delay_before_s=0.0,
            delay_reason=None,
            started_s=0.0,
            duration_ms=attempt.duration_ms,
        )
        ts = time.time() - attempt.duration_ms / 1000
        row = attempt_row(self._info, record, Usage(), self._state.catalog, ts)
        records.add(row | {"operation": COUNT_OPERATION, "counted_tokens": attempt.tokens})
