"""Recording: one attempt's outcome told to the observer and counted by the breakers (SPEC §5, §9).

Owns: the end of an attempt, once its outcome is known: the observer's `attempt_ended`, the
breakers' count with the credential it used and its speed (time to first token, output
tokens per second), the usage cap a quota failure names; for a committed stream, the `Finish`
that does the same when the stream ends.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

from collections.abc import Awaitable

import msgspec

from turnout.adapters.base import AttemptResult, Usage
from turnout.core.classify import DISPOSITION
from turnout.core.credentials import Credential
from turnout.core.loop import AttemptRecord
from turnout.core.types import FailureKind, Target
from turnout.health import Breakers, HealthView, credential_subject, plan_cap_scope
from turnout.router.request import Clock, Finish, RequestInfo, RouteObserver
from turnout.scrub import Scrubber
from turnout.state.breaker_store import Speed
from turnout.tenancy.byok import ResolvedCall


class Recorder:
    """Ends attempts: the observer's record and the breakers' count.

    Args:
        breakers: the fleet-wide breakers and health.
        observer: the loop's telemetry hooks.
        clock: monotonic seconds (a committed stream's duration).
        scrubber: the egress scrubber (a stream's final error text passes it).
    """

    def __init__(self, *, breakers: Breakers, observer: RouteObserver, clock: Clock, scrubber: Scrubber) -> None:
        self.breakers = breakers
        self.observer = observer
        self._clock = clock
        self._scrubber = scrubber

    async def ended(
        self,
        handle: object,
        info: RequestInfo,
        record: AttemptRecord,
        result: AttemptResult,
        probe_token: str | None,
        view: HealthView,
        call: ResolvedCall,
    ) -> None:
        """Record an attempt that ended with its answer (a JSON answer, or a failure before any
        content): its latency is the whole call. A quota failure with a reset time caps the
        account's plan on the target (SPEC §10 plan-cap continuity)."""
        self.observer.attempt_ended(handle, info, record, result.usage)
        measures = None
        if record.kind is FailureKind.SUCCESS:  # a JSON answer: its latency is the whole call
            measures = Speed(ttft_ms=record.duration_ms, tokens_per_s=output_rate(result.usage, record.duration_ms))
        await self.breakers.results.record(
            record.target.key,
            record.kind,
            probe_token=probe_token,
            error=_error_text(record.status, record.message),
            view=view,
            retry_after_s=record.retry_after_s,
            measures=measures,
            credential=call.credential,
            credential_key=_credential_key(call, record.target, info),
        )
        if record.kind is FailureKind.QUOTA_EXHAUSTED and record.retry_after_s:  # the provider said when it resets
            await self.breakers.plan_caps.cap(
                plan_cap_scope(call.credential, info.org), record.target.key, record.retry_after_s, view
            )

    def cancelled(
        self, handle: object, info: RequestInfo, record: AttemptRecord, probe_token: str | None, view: HealthView
    ) -> Awaitable[None]:
        """Tell the observer of an attempt the client's leaving cancelled; returns the breakers'
        count of it, for the caller to await shielded (it must run to its end)."""
        self.observer.attempt_ended(handle, info, record, Usage())
        return self.breakers.results.record(
            record.target.key, FailureKind.CANCELLED, probe_token=probe_token, error="", view=view
        )

    def finisher(
        self,
        record: AttemptRecord,
        probe_token: str | None,
        handle: object,
        info: RequestInfo,
        view: HealthView,
        call: ResolvedCall,
    ) -> Finish:
        """The `Finish` of a stream committed with `record` (its record at the commit point)."""

        async def finish(kind: FailureKind, usage: Usage, error: str) -> None:
            error = self._scrubber.text(error)
            final = msgspec.structs.replace(
                record,
                kind=kind,
                disposition=DISPOSITION[kind],
                duration_ms=max(0.0, (self._clock() - record.started_s) * 1000.0),
                message=error if kind is not FailureKind.SUCCESS else "",
                first_token_ms=record.duration_ms,
            )
            self.observer.attempt_ended(handle, info, final, usage)
            # the time to first token is the attempt's duration at its commit point (`record`)
            measures = Speed(
                ttft_ms=record.duration_ms,
                tokens_per_s=output_rate(usage, final.duration_ms) if kind is FailureKind.SUCCESS else None,
            )
            await self.breakers.results.record(
                record.target.key,
                kind,
                probe_token=probe_token,
                error=error,
                view=view,
                measures=measures,
                credential=call.credential,
                credential_key=_credential_key(call, record.target, info),
            )

        return finish


def _credential_key(call: ResolvedCall, target: Target, info: RequestInfo) -> str | None:
    """The health subject of the tenant's own credential `call` used (`Breakers.results.record`
    counts it there too), or None for the shared key."""
    owned = call.credential is not Credential.SHARED and bool(info.org)
    return credential_subject(info.org, target.provider) if owned else None


def output_rate(usage: Usage, duration_ms: float) -> float | None:
    """Completion tokens per second of one attempt (`turnout.core.ordering` `throughput`),
    or None when it produced none or took no measurable time."""
    if usage.output_tokens <= 0 or duration_ms <= 0:
        return None
    return usage.output_tokens / (duration_ms / 1000.0)


def _error_text(status: int | None, message: str) -> str:
    return f"{status if status is not None else 'no status'}: {message}"[:200]
