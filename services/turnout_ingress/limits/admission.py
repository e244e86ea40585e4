"""Limits at the ingress: ceilings, admission before enqueue, and the 429 answer (SPEC §10).

Owns: turning a key's `limits` (`Identity.limits`) and a request into
either a held admission (its lease renewed until the answer has been sent,
its `x-ratelimit-*` headers) or a `RequestRejected`: 400 for a `max_tokens`
/ `max_completion_tokens` / `n` above a ceiling, 429 `rate_limit_exceeded`
with `Retry-After`, `retry-after-ms` and OpenAI's `x-ratelimit-*` headers
for a limit reached. A key with no counted limit costs no Redis call; an
unkeyed queued request's admission runs in its enqueue's script (`Limiter.gate`),
and its worker frees its slots and charges its `tpm` (`worker_settles`).
Must not import: `turnout_ingress.app`.

Redis unreachable: 503 `redis_unavailable` (the queue needs Redis anyway;
serving a limited key unmetered would break the limit silently).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import msgspec
from redis.asyncio import Redis
from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from turnout.core.limits import (
    Demand,
    LimitName,
    Limits,
    Quota,
    ScopeLimits,
    Verdict,
    check_ceilings,
    estimate_tokens,
    header_duration,
    is_limited,
    lowest,
)
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.errors import StateUnavailable
from turnout.state.jobs.door import Gate
from turnout.state.lease_keeper import LeaseKeeper
from turnout.state.limit_store import Admission, AdmitCall, Lease, LimitStore, Reservation, keys_of
from turnout.state.token_charge import TokenCharger
from turnout.tenancy.identity import Identity
from turnout_ingress.limits.reservations import over_budget
from turnout_ingress.serving.disconnect import Outlived

log = logging.getLogger("turnout.limits")

_WHAT: dict[LimitName, str] = {
    "rpm": "requests per minute (rpm)",
    "tpm": "tokens per minute (tpm)",
    "max_concurrent": "requests in flight (max_concurrent)",
    "max_streams": "streams in flight (max_streams)",
}


class Held(msgspec.Struct, frozen=True, kw_only=True):
    """An admitted request: its lease (release it once answered), the headers to add, and
    for a key with a `tpm` limit, its scopes and the tokens admission charged (settled to
    the answer's usage by `Limiter.used`)."""

    lease: Lease
    headers: dict[str, str]
    scopes: tuple[ScopeLimits, ...] = ()
    estimate: int = 0


NOT_LIMITED = Held(lease=Lease(id=""), headers={})


class Pending(msgspec.Struct, frozen=True, kw_only=True):
    """A request past its ceilings, its admission not yet run (`Limiter.prepare`).

    Attributes:
        identity: the caller.
        demand: what it asks (tokens estimated, stream or not).
        reservations: its hard budgets' reservations (the order of `Admission.budget_refused`).
        call: the admission's Lua call (`LimitStore.call`).
    """

    identity: Identity
    demand: Demand
    call: AdmitCall
    reservations: tuple[Reservation, ...] = ()


def worker_settles(pending: Pending) -> dict[str, Any]:
    """The job fields (`turnout.wire.JobPayload`) by which its worker frees the request's slots
    in its answer's delivery and charges its `tpm` to the answer's usage in its ledger write."""
    tpm = tuple((keys_of(s)[1], s.limits.tpm) for s in pending.call.scopes if s.limits.tpm is not None)
    return {"lease_sets": pending.call.lease.sets, "tpm": tpm, "estimate": pending.demand.tokens if tpm else 0}


class LateHeld:
    """The `Held` of a request admitted in its enqueue's script: `NOT_LIMITED` until then
    (`Limiter.gate`); `Limiter.answer` reads it once the response is there."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = NOT_LIMITED


Settle = Callable[[Sequence[tuple[str, str]]], None]
"""Hands a request's budget reservations (`Lease.holds`) to the spend ledger of the process
that served it (`SpendLedger.settle`, bound to the request's org)."""


def quota_headers(verdict: Verdict) -> dict[str, str]:
    """OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` for the tightest scopes."""
    headers: dict[str, str] = {}
    pairs: tuple[tuple[str, Quota | None], ...] = (("requests", verdict.requests), ("tokens", verdict.tokens))
    for unit, quota in pairs:
        if quota is not None:
            headers[f"x-ratelimit-limit-{unit}"] = str(quota.limit)
            headers[f"x-ratelimit-remaining-{unit}"] = str(quota.remaining)
            headers[f"x-ratelimit-reset-{unit}"] = header_duration(quota.reset_ms)
    return headers


def _requested(body: Mapping[str, Any]) -> dict[str, int]:
    return {f: v for f in ("max_tokens", "max_completion_tokens", "n") if isinstance(v := body.get(f), int)}


class Limiter:
    """One per ingress: the limit store and the keeper of the leases this process holds."""

    def __init__(self, redis: Redis, *, lease_ms: int = 30_000) -> None:
        self.store = LimitStore(redis, lease_ms=lease_ms)
        self.keeper = LeaseKeeper(self.store)
        self.charger = TokenCharger(redis)
        self._releasing: set[asyncio.Task[None]] = set()  # releases started by work that outlived its client

    def start(self) -> None:
        """Start renewing held leases."""
        self.keeper.start()

    async def stop(self) -> None:
        """Stop renewing (leases still held then expire by themselves)."""
        await self.keeper.stop()

    def prepare(
        self,
        identity: Identity,
        body: Mapping[str, Any],
        body_bytes: int,
        request_id: str,
        *,
        stream: bool,
        reservations: Sequence[Reservation] = (),
    ) -> Pending | None:
        """Check the ceilings, and make the Lua call that admits the request against every limit
        of its key and reserves its worst case against its hard budgets (all or nothing): run it
        alone (`decide`) or in the enqueue's own script (`gate`).

        Args:
            identity: the caller (its `limits`, org first).
            body: the decoded OpenAI chat request.
            body_bytes: the request body's size (the prompt estimate).
            request_id: the lease id.
            stream: a streaming request (counts against `max_streams` too).
            reservations: its hard budgets (`turnout_ingress.limits.budgets.reservations`).

        Returns:
            The admission to run; None: nothing to admit (no counted limit, no hard budget).

        Raises:
            RequestRejected: 400 (`param` the field) above a ceiling.
        """
        scopes = identity.limits
        if not scopes and not reservations:
            return None
        requested = _requested(body)
        over = check_ceilings(scopes, requested)
        if over is not None:
            ceiling = "max_n" if over.field == "n" else "max_tokens"
            raise RequestRejected(
                400,
                f"`{over.field}` is {over.value}, above the limit of {over.ceiling} ({ceiling}) set on {over.scope}.",
                param=over.field,
                code="invalid_request",
            )
        if not is_limited(scopes) and not reservations:
            return None
        completion = requested.get("max_completion_tokens", requested.get("max_tokens"))
        if completion is None and (bound := lowest(scopes, "max_tokens")) is not None:
            completion = bound[0]
        demand = Demand(
            tokens=estimate_tokens(body_bytes, completion, requested.get("n", 1)),
            stream=stream,
            lease_ms=self.store.lease_ms,
        )
        call = self.store.call(scopes, demand, request_id, reservations=reservations)
        return Pending(identity=identity, demand=demand, reservations=tuple(reservations), call=call)

    async def decide(self, pending: Pending) -> Held:
        """Run `pending`'s admission alone (its own Lua call).

        Returns:
            What to release once the answer has been sent, and the `x-ratelimit-*` headers
            for the answer.

        Raises:
            RequestRejected: 429 `rate_limit_exceeded` at a limit; 429 `budget_exceeded` when
                its worst case exceeds what is left of a hard budget.
            GatewayUnavailable: 503 `redis_unavailable`.
        """
        return self._held(pending, await self._run(pending.call))

    def delivered(self, held: Held) -> Held:
        """`held` once its job's worker delivered the answer: that worker freed its slots in the
        delivery and charges its `tpm` and settles its reservations in its ledger write (the job
        carried them, `worker_settles`); this process only stops renewing its lease. Returns what
        is left to do here: its headers, nothing to release or charge."""
        if not held.lease.held:
            return held
        self.keeper.forget(held.lease)
        return Held(lease=Lease(id=held.lease.id), headers=held.headers)

    def gate(self, pending: Pending, late: LateHeld) -> Gate:
        """`pending`'s admission for the enqueue's script (`turnout.state.jobs.door.Gate`): its
        decision raises the refusal, or keeps the lease renewed and puts the `Held` in `late`."""

        def decide(admission: Admission) -> None:
            late.held = self._held(pending, admission)

        return Gate(call=pending.call, decide=decide)

    async def admit_count(self, identity: Identity, request_id: str) -> Held:
        """Admit a `POST /v1/messages/count_tokens` against the `rpm` of every scope of its key,
        on counters of its own (`count:rpm`: counting does not spend the key's model calls,
        nor they its counts; issue #40).

        Raises:
            RequestRejected: 429 `rate_limit_exceeded` over an `rpm`.
            GatewayUnavailable: 503 `redis_unavailable`.
        """
        scopes = tuple(
            msgspec.structs.replace(s, limits=Limits(rpm=s.limits.rpm)) for s in identity.limits if s.limits.rpm
        )
        if not scopes:
            return NOT_LIMITED
        demand = Demand(tokens=0, stream=False, lease_ms=self.store.lease_ms)
        call = self.store.call(scopes, demand, request_id, family="count:")
        return self._held(Pending(identity=identity, demand=demand, call=call), await self._run(call))

    async def _run(self, call: AdmitCall) -> Admission:
        """The admission's own Lua call.

        Raises:
            GatewayUnavailable: 503 `redis_unavailable`.
        """
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                return await self.store.run(call)
        except (StateUnavailable, TimeoutError) as exc:
            raise GatewayUnavailable(
                "The gateway cannot check this key's limits now (Redis unreachable); retry shortly.",
                retry_after_s=1,
                code="redis_unavailable",
            ) from exc

    def _held(self, pending: Pending, admission: Admission) -> Held:
        """The admitted request's `Held` (its lease renewed from now on), or its refusal raised.

        Raises:
            RequestRejected: 429 `rate_limit_exceeded` or `budget_exceeded` (`decide`).
        """
        identity, demand, scopes = pending.identity, pending.demand, pending.call.scopes
        if admission.budget_refused is not None:
            raise over_budget(
                identity, pending.reservations[admission.budget_refused], admission.spent_micro, admission.held_micro
            )
        verdict = admission.verdict
        headers = quota_headers(verdict)
        refusal = verdict.refusal
        if refusal is None:
            self.keeper.hold(admission.lease)
            metered = tuple(s for s in scopes if s.limits.tpm is not None)
            return Held(lease=admission.lease, headers=headers, scopes=metered, estimate=demand.tokens)
        scope = scopes[refusal.scope]
        limit = getattr(scope.limits, refusal.limit)
        if refusal.retry_after_ms is None:
            raise RequestRejected(
                429,
                f"This request needs about {demand.tokens} tokens, more than the {_WHAT[refusal.limit]} "
                f"limit of {limit} set on {scope.label}; it can never be admitted. Lower `max_tokens` or the prompt.",
                error_type="requests",
                code="rate_limit_exceeded",
                headers={**headers, "x-should-retry": "false"},
            )
        wait_ms = refusal.retry_after_ms
        headers["retry-after"] = str(max(1, math.ceil(wait_ms / 1000)))
        headers["retry-after-ms"] = str(wait_ms)
        raise RequestRejected(
            429,
            f"Rate limit reached: {_WHAT[refusal.limit]} limit of {limit} set on {scope.label}. "
            f"Retry after {header_duration(wait_ms)}.",
            error_type="requests",
            code="rate_limit_exceeded",
            headers=headers,
        )

    def used(self, held: Held, tokens: int | None) -> None:
        """Settle `held`'s `tpm` charge to the `tokens` its answer reported (None: it reported
        none, the estimate stands), in the background; never raises (issue #40 item 4)."""
        if tokens is None or not held.scopes or tokens == held.estimate:
            return
        task = asyncio.get_running_loop().create_task(self._charge(held, tokens))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _charge(self, held: Held, tokens: int) -> None:
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                await self.charger.charge(held.scopes, held.estimate, tokens)
        except (StateUnavailable, TimeoutError) as exc:
            log.warning("tpm usage of %s not charged (Redis): %s", held.lease.id, type(exc).__name__)

    async def release(self, held: Held, settle: Settle | None = None) -> None:
        """Free the request's concurrency slots; never raises (they expire otherwise). With
        `settle` (the request was served in this process: a stream), its budget reservations
        go to it first, to leave in the spend ledger's next write with the request's cost
        (`turnout.state.spend_store.SpendLedger.settle`); the lease's own release keeps them
        only `SETTLE_HOLD_MS` more, the fallback for a ledger write that never comes.

        Shielded: a release started by a cancelled request still completes.
        """
        if settle is not None and held.lease.holds:
            settle(held.lease.holds)
        if held.lease.held:
            await asyncio.shield(self.keeper.release(held.lease))

    async def answer(
        self, held: Held | LateHeld, respond: Awaitable[Response], settle: Settle | None = None
    ) -> Response:
        """Await the route's response; add `held`'s headers; release `held` once it has been sent
        (`settle`: see `release`). A `LateHeld` is read once the response is there (admitted by
        the enqueue's script meanwhile, or not).

        The release runs however the sending ends — complete, failed, the
        client gone before the first byte or in the middle of a stream — or,
        for an `Outlived` answer (the client left, the job runs on), once the
        job's work ends.
        """
        try:
            response = await respond
        except BaseException:
            await self.release(held.held if isinstance(held, LateHeld) else held, settle)
            raise
        now = held.held if isinstance(held, LateHeld) else held
        if now.headers:
            response.headers.update(now.headers)
        if not now.lease.held:
            return response
        if isinstance(response, Outlived):  # the client left, its job runs on: the slots stay until it ends
            response.work.add_done_callback(lambda _: self._release_soon(now, settle))
            return response
        return _Releasing(response, lambda: self.release(now, settle))

    def _release_soon(self, held: Held, settle: Settle | None) -> None:
        """Start `release(held, settle)` from a callback, keeping the task until it ends."""
        task = asyncio.get_running_loop().create_task(self.release(held, settle))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)


class _Releasing(Response):
    """An ASGI response that sends `inner`, then calls `release` (in a `finally`)."""

    def __init__(
        self, inner: Response, release: Callable[[], Awaitable[None]]
    ) -> None:  # the inner response is sent as is
        self.inner = inner
        self.status_code = inner.status_code
        self.background = None
        self._release = release

    @property
    def headers(self) -> MutableHeaders:
        return self.inner.headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.background is not None and self.inner.background is None:
            self.inner.background = self.background
        try:
            await self.inner(scope, receive, send)
        finally:
            await self._release()
