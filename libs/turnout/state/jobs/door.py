"""The ingress's side of the queue: enqueue (shedding at the door), wait, join, withdraw.

Owns: one Lua round trip that checks depth and the expected wait (plus service) against the
job's budget (shedding at the door, `turnout.core.queue_wait`), stores the job's envelope
(`envelope.encode_job`), adds it to the queue and to its org's fair queue (the worker's pick,
`pickup.py`, claims round robin across orgs) and rings the doorbell (one entry on a list, which
wakes one worker), behind a limited key's admission in the same script when given its `Gate`
(`enqueue_lua.ADMIT_ENQUEUE`: a queued request of a key with limits and a hard budget costs the
one round trip of a plain one); one shared pub/sub listener per ingress process that resolves per-request
futures (registered before enqueue); a slow read of the stored result so a dropped pub/sub
message cannot hang a request; the "nobody picked it up in time" answer; the withdrawal of a
job whose client left (from the queue, its job key and its org's fair queue, in one Lua call)
so it never runs; and the join of another caller's request (`Idempotency-Key`, `idempotency.py`).
With `replica_wait`, the enqueue waits for a replica's acknowledgement (`replicated.py`).
Every key a script touches carries the queue's hash tag (`keys.JOBS_TAG`): one slot.
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import NamedTuple

import msgspec
from redis.asyncio import Redis

from turnout.core.queue_wait import max_jobs_ahead, shed_retry_after_s
from turnout.errors import GatewayUnavailable
from turnout.state import keys
from turnout.state.bounds import REQUEST_REDIS_TIMEOUT_S
from turnout.state.errors import STATE_ERRORS
from turnout.state.fleet import FleetWatch
from turnout.state.jobs.enqueue_lua import ADMIT_ENQUEUE, ENQUEUE
from turnout.state.jobs.envelope import encode_job
from turnout.state.jobs.idempotency import Idempotency, queue_unreachable
from turnout.state.jobs.liveness import IngressLease
from turnout.state.jobs.replicated import ReplicaWait, run_then_wait
from turnout.state.limit_store import Admission, AdmitCall
from turnout.state.listen import Message, listen_forever
from turnout.state.script_batch import ScriptBatch
from turnout.wire import JobPayload, JobResult, result_decoder

log = logging.getLogger("turnout.queue")

ABANDON_WAIT_S = 1.0
"""Longest a request whose client left waits for its job's withdrawal (seconds)."""


class Gate(NamedTuple):
    """A limited key's admission, run in the enqueue's own script (`enqueue_lua.ADMIT_ENQUEUE`).

    Attributes:
        call: the admission's KEYS, ARGV and reply reading (`LimitStore.call`).
        decide: takes the `Admission` before anything else happens: raises the request's
            refusal (the job was not queued), or keeps the admitted lease (the job was queued).
    """

    call: AdmitCall
    decide: Callable[[Admission], None]


# KEYS: queue, in-progress key, job key, the org's fair queue, fair ring   ARGV: job id, org, force (0/1)
# Takes a job out of every queue structure so it never runs (late or at all): the queue, its job
# key, its org's fair queue (and the org off the ring once that is empty). A job a worker holds is
# left alone unless `force` (the client left: it must not re-run after its worker dies either).
# Returns 1 if no worker held the job, 0 if one did.
_WITHDRAW = """
local held = redis.call('exists', KEYS[2])
if held == 1 and ARGV[3] == '0' then return 0 end
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('del', KEYS[3])
redis.call('zrem', KEYS[4], ARGV[1])
if redis.call('zcard', KEYS[4]) == 0 then redis.call('lrem', KEYS[5], 0, ARGV[2]) end
return 1 - held
"""


class JobQueue:
    """Ingress side of the queue: submit a job and wait for its result.

    Args:
        redis: a client (binary responses) shared by the process.
        listen_redis: a client without a socket read timeout, for the
            long-lived pub/sub subscription (an idle channel is normal).
        ingress_id: unique per process; names its reply channel.
        max_depth: queued + running jobs above which submissions are shed.
        result_poll_s: interval of the slow fallback read of a stored result.
        grace_s: extra seconds past the deadline to wait for a worker's answer.
        around_enqueue: called with the job id around putting the job on the
            queue; yields the W3C trace context to put in
            `JobPayload.trace` (None, the default: nothing around it, no trace context).
        fleet: the fleet's capacity (workers' heartbeats); with it, a job whose
            expected wait plus one service time exceeds its budget is shed at
            the door (`queue_full`).
            None: shed on `max_depth` only.
        also: more channels the result listener subscribes to (channel -> handler of
            a message's data): a handler runs before any result published after its
            message is handed out (one subscription, messages in publish order), and
            with empty data after the listener lost Redis (messages may be lost).
        clock: epoch seconds (deadlines).
        rng: draws the result listener's reconnect jitter.
        sleep: waits the listener's reconnect backoff (seconds).
        replica_wait: each enqueue waits (`WAIT`) for that many replicas to hold the job, at most
            its timeout (`replicated.run_then_wait`); None (the default): no wait.

    Attributes:
        idempotency: the `Idempotency-Key` bindings (`idempotency.Idempotency`) on the same client.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        listen_redis: Redis,
        ingress_id: str,
        max_depth: int,
        result_poll_s: float = 1.0,
        grace_s: float = 1.0,
        around_enqueue: Callable[[str], AbstractContextManager[dict[str, str]]] | None = None,
        fleet: FleetWatch | None = None,
        also: Mapping[str, Callable[[bytes], None]] | None = None,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        replica_wait: ReplicaWait | None = None,
    ) -> None:
        self._clock = clock
        self._replica_wait = replica_wait
        self._around_enqueue = around_enqueue
        self._fleet = fleet
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._redis = redis
        self._listen_redis = listen_redis
        self._channel = keys.reply_channel(ingress_id)
        self._also = {name.encode(): handler for name, handler in (also or {}).items()}
        self._max_depth = max_depth
        self._result_poll_s = result_poll_s
        self._grace_s = grace_s
        self._waiters: dict[str, list[asyncio.Future[JobResult]]] = {}
        self._pushing: set[str] = set()  # enqueues in flight: not yet known to Redis, never called lost
        self.idempotency = Idempotency(redis)
        self._enqueue = redis.register_script(ENQUEUE)
        self._enqueues = ScriptBatch(redis, self._enqueue, name="turnout-enqueue", send_abandoned=False)
        self._admit_enqueue = redis.register_script(ADMIT_ENQUEUE)
        self._admit_enqueues = ScriptBatch(
            redis, self._admit_enqueue, name="turnout-admit-enqueue", send_abandoned=False
        )
        self._withdraw = redis.register_script(_WITHDRAW)
        self._listener: asyncio.Task[None] | None = None
        self._lease = IngressLease(redis, self._channel)  # its jobs are withdrawn unrun once it is gone

    @property
    def reply_channel(self) -> str:
        """The pub/sub channel workers publish this process's results on."""
        return self._channel

    async def start(self) -> None:
        """Start the shared result listener (reconnects on its own) and the liveness lease."""
        self._listener = asyncio.create_task(self._listen(), name="turnout-result-listener")
        self._lease.start()

    async def stop(self) -> None:
        """Stop the listener and end the liveness lease."""
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self._lease.stop()

    async def _listen(self) -> None:
        await listen_forever(
            self._listen_redis,
            [self._channel, *(name.decode() for name in self._also)],
            self._resolve,
            name="result listener",
            rng=self._rng,
            sleep=self._sleep,
            on_subscribed=self._subscribed,
        )

    async def _subscribed(self, reconnected: bool) -> None:
        if reconnected:
            for handler in self._also.values():  # what was published meanwhile is lost: anything may have changed
                handler(b"")
            await self._settle_lost()

    async def _resolve(self, message: Message | None) -> None:
        """Hand a published result to the requests waiting for it."""
        if message is None:
            return
        handler = self._also.get(message["channel"])
        if handler is not None:  # heard before any result published after it (one connection, in order)
            handler(message["data"])
            return
        try:
            result = result_decoder.decode(message["data"])
        except Exception:  # noqa: BLE001 - a bad message must not kill the listener
            log.warning("undecodable result message on %s", self._channel)
            return
        for fut in self._waiters.get(result.request_id, ()):
            if not fut.done():
                fut.set_result(result)

    async def submit(self, payload: JobPayload, gate: Gate | None = None) -> JobResult:
        """Enqueue `payload` and wait for its result, up to its deadline; with `gate`, admit
        it against its key's limits and budget in the same script first (`Gate`).

        Returns:
            The worker's `JobResult`.

        Raises:
            RequestRejected: what `gate.decide` raises (a limit or a budget refused it).
            GatewayUnavailable: Redis unreachable (`redis_unavailable`), the
                queue is full (`queue_full`), or no worker picked the job before
                its deadline (`no_worker`); all answered 503 + Retry-After.
            TimeoutError: a worker took the job but no answer came before the
                deadline (+ grace); the caller answers 504. The job is
                withdrawn and its run cancelled first, as for a client that
                left: nobody waits for its answer any more.
        """
        job_id = payload.request_id
        fut = self._register(job_id)
        try:
            self._pushing.add(job_id)
            try:
                if self._around_enqueue is None:
                    await self._push(payload, gate)
                else:
                    with self._around_enqueue(job_id) as carrier:  # trace context rides in the job (SPEC §9)
                        await self._push(msgspec.structs.replace(payload, trace=carrier) if carrier else payload, gate)
            finally:
                self._pushing.discard(job_id)
            return await self._wait(job_id, payload.org, fut, payload.deadline_epoch_s)
        except asyncio.CancelledError:
            await self._abandon(job_id, payload.org)  # the client left: a queued job must never run
            raise
        except TimeoutError:  # the ingress's own 504: the same as a client that left
            await self._abandon(job_id, payload.org)
            await self.cancel(job_id)
            raise
        finally:
            self._unregister(job_id, fut)

    async def _withdraw_job(self, job_id: str, org: str, *, force: bool) -> bool:
        """Run `_WITHDRAW` for `job_id` of `org`; True if no worker held the job.

        Raises:
            One of `STATE_ERRORS`: Redis unreachable.
        """
        held_by_none = await self._withdraw(
            keys=[
                keys.QUEUE,
                keys.IN_PROGRESS_PREFIX + job_id,
                keys.JOB_PREFIX + job_id,
                keys.fair_org_key(org),
                keys.FAIR_RING,
            ],
            args=[job_id, org, int(force)],
        )
        return bool(held_by_none)

    async def _abandon(self, job_id: str, org: str) -> None:
        """Withdraw the job of a client that left, waiting at most `ABANDON_WAIT_S` (best effort).

        A job a worker already holds is withdrawn too (it is not re-run if
        that worker dies); stopping its run is `cancel`'s work.
        """
        with contextlib.suppress(*STATE_ERRORS, TimeoutError):
            await asyncio.wait_for(self._withdraw_job(job_id, org, force=True), ABANDON_WAIT_S)

    def _register(self, job_id: str) -> asyncio.Future[JobResult]:
        fut: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(fut)
        return fut

    def _unregister(self, job_id: str, fut: asyncio.Future[JobResult]) -> None:
        waiting = self._waiters.get(job_id)
        if waiting is not None:
            waiting.remove(fut)
            if not waiting:
                del self._waiters[job_id]

    async def _settle_lost(self) -> None:
        """After the listener lost Redis: answer waiters whose job is gone.

        A result published while the listener was away is read from its key;
        a job that no longer exists at all (Redis restarted without it) is
        answered 503 at once instead of waiting for its deadline. A job whose
        enqueue is still in flight is left out: it is not in Redis yet (a
        `WAIT` after a failover can hold it there for the whole timeout).
        """
        job_ids = [job_id for job_id in self._waiters if job_id not in self._pushing]
        if not job_ids:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.get(keys.result_key(job_id))
                pipe.exists(keys.JOB_PREFIX + job_id)
            replies = await pipe.execute()
        for i, job_id in enumerate(job_ids):
            stored, exists = replies[2 * i], replies[2 * i + 1]
            for fut in self._waiters.get(job_id, ()):
                if fut.done():
                    continue
                if stored:
                    fut.set_result(result_decoder.decode(stored))
                elif not exists:
                    fut.set_exception(
                        GatewayUnavailable(
                            "The request was lost while the gateway's queue restarted; retry it.",
                            retry_after_s=1,
                            code="job_lost",
                        )
                    )
                    log.warning("job %s lost across a Redis restart; answered 503", job_id)

    async def join(self, job_id: str, deadline_epoch_s: float) -> JobResult:
        """Wait for the result of a request another caller submitted.

        Raises:
            TimeoutError: no result before the deadline (+ grace).
        """
        fut = self._register(job_id)
        try:
            while True:
                stored = await self._stored(job_id)
                if stored is not None:
                    return stored
                remaining = deadline_epoch_s + self._grace_s - self._clock()
                if remaining <= 0:
                    raise TimeoutError(job_id)
                try:
                    return await asyncio.wait_for(asyncio.shield(fut), min(remaining, 0.2))
                except TimeoutError:
                    continue
        finally:
            self._unregister(job_id, fut)

    async def _push(self, payload: JobPayload, gate: Gate | None = None) -> None:
        job_id = payload.request_id
        expires_ms = max(1, int((payload.deadline_epoch_s - self._clock()) * 1000))
        payload = msgspec.structs.replace(payload, budget_ms=expires_ms)  # measured from the score (Redis TIME)
        job = encode_job(payload, int(self._clock() * 1000))
        capacity = self._fleet.capacity if self._fleet is not None else None
        try:
            job_keys = [
                keys.JOB_PREFIX + job_id,
                keys.QUEUE,
                keys.result_key(job_id),
                keys.fair_org_key(payload.org),
                keys.FAIR_RING,
                keys.DOORBELL,
            ]
            job_args: list[bytes | str | int] = [
                job,
                expires_ms,
                job_id,
                self._max_depth,
                keys.FAIR_ORG_PREFIX,
                payload.org,
                max_jobs_ahead(expires_ms, capacity),
                int(payload.keyed),
            ]
            script, batch = self._enqueue, self._enqueues
            if gate is not None:
                script, batch = self._admit_enqueue, self._admit_enqueues
                job_keys, job_args = [*job_keys, *gate.call.keys], [*job_args, *gate.call.args]
            wait = self._replica_wait
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S + (0 if wait is None else wait.timeout_ms / 1000)):
                if wait is None:
                    reply = await batch(job_keys, job_args)  # concurrent enqueues share a round trip
                else:
                    reply = await run_then_wait(self._redis, script, job_keys, job_args, wait)
        except STATE_ERRORS as exc:
            raise queue_unreachable() from exc
        added, ahead = int(reply[0]), reply[1]
        if gate is not None and len(reply) > 2:  # admitted and queued, or refused (2) with nothing written
            gate.decide(gate.call.parse(reply[2]))
        if added == 2:
            raise RuntimeError(f"the admission refused job {job_id} but its gate did not raise")
        if added == -2 and capacity is not None:
            raise GatewayUnavailable(
                f"The gateway is at capacity: about {ahead} jobs are ahead of this one, more than its time budget "
                "allows; retry later.",
                retry_after_s=shed_retry_after_s(int(ahead), expires_ms, capacity),
                code="queue_full",
            )
        if added == -1:
            raise GatewayUnavailable(
                "The gateway is at capacity (queue full); retry shortly.", retry_after_s=1, code="queue_full"
            )
        if added == 0:
            raise GatewayUnavailable(f"A job with id {job_id} already exists.", retry_after_s=1, code="duplicate_job")

    async def _wait(self, job_id: str, org: str, fut: asyncio.Future[JobResult], deadline_epoch_s: float) -> JobResult:
        waiting = fut  # not shielded (a step fewer after the answer): a bound that runs out cancels it
        try:
            while True:
                remaining = deadline_epoch_s + self._grace_s - self._clock()
                if remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(min(remaining, self._result_poll_s)):  # no task per wait
                        return await waiting
                except TimeoutError:
                    if waiting is not fut:
                        self._unregister(job_id, waiting)
                    waiting = self._register(job_id)  # before the read: an answer published meanwhile is not missed
                    stored = await self._stored(job_id)
                    if stored is not None:
                        return stored
        finally:
            if waiting is not fut:  # `submit` unregisters the first
                self._unregister(job_id, waiting)
        stored = await self._stored(job_id)
        if stored is not None:
            return stored
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                withdrawn = await self._withdraw_job(job_id, org, force=False)
        except STATE_ERRORS:
            withdrawn = True
        if withdrawn:
            raise GatewayUnavailable(
                "No worker picked the request before its deadline; retry shortly.", retry_after_s=2, code="no_worker"
            )
        raise TimeoutError(job_id)

    async def _stored(self, job_id: str) -> JobResult | None:
        try:
            async with asyncio.timeout(REQUEST_REDIS_TIMEOUT_S):
                data = await self._redis.get(keys.result_key(job_id))
        except STATE_ERRORS:
            return None
        return result_decoder.decode(data) if data else None

    async def cancel(self, job_id: str) -> None:
        """Tell the fleet the client of `job_id` went away (best effort).

        A worker running the job cancels it; a queued job was already
        withdrawn by `submit` when its wait was cancelled.
        """
        with contextlib.suppress(*STATE_ERRORS):
            await self._redis.publish(keys.CANCEL_CHANNEL, job_id)
