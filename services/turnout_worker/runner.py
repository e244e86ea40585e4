"""The worker's job runner: a claimed job's run, and the process's life (start, signals, drain, stop).

Owns: running one job that `turnout.state.jobs` claimed (its envelope, try and Redis clock read in
the claim's round trip) — the job function looked up among arq `Function`s (`arq.worker.func`:
name, coroutine, timeout, max tries), called with arq's job context (`ctx`: the worker's own
entries plus `job_id`, `job_try`, `enqueue_time`, `score`) between the `on_job_start` and
`after_job_end` hooks, under its timeout — then the job's end in the queue: nothing after a
delivered answer (`deliver` finished it), the job dropped after a failure, a timeout, an abort
(the client left), too many tries or an expired envelope, and the job given back (its lease
deleted, so another worker's scan claims it) when this worker's stop cut its run. Also the
process around it: `run` (SIGINT / SIGTERM: stop picking, wait up to `job_completion_wait` for the
jobs in flight, cancel the rest, `on_shutdown`, close the pool), and the slot count (`sem`,
`job_counter`). The pickup (which job to claim, when) is `turnout_worker.pickup`.

Why our own runner (issue 42): arq 0.28's public API runs only the jobs its own scan finds — it
claims them with a WATCH transaction on its fixed `arq:*` keys, with a lease of the job timeout +
10 s, first in first out. Turnout needs a fair pick across orgs, a renewed short lease and keys
under one hash tag; the earlier worker got them by overriding arq's undocumented methods and
faking its opening pipeline. arq has no public way to run a job one has claimed oneself, so this
module runs it, keeping arq's public pieces that still serve: `func`/`Function` for the job
functions, its hook signatures and `ctx` conventions, and `ArqRedis` as the pool's client class.
Must not import: FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from arq.connections import ArqRedis
from arq.worker import Function

from turnout.core.kept_answer import lease_held, lease_ms, may_keep, retry_delay_s, still_kept
from turnout.state.errors import StateUnavailable
from turnout.state.jobs import PickupStore, read_job

log = logging.getLogger("turnout.worker")

Hook = Callable[[dict[str, Any]], Awaitable[None]]
"""An arq-style hook: `on_startup`, `on_shutdown`, `on_job_start`, `after_job_end` (given `ctx`)."""


class Claimed:
    """What the claim of one job read for it, in the same round trip.

    Attributes:
        job: the job's envelope bytes, None if it expired.
        job_try: its try counter after this claim (1: the first run).
        now_ms: Redis `TIME` at the claim (epoch ms).
        at_s: this process's monotonic clock at the claim (seconds; by default when this is built;
            the pickup passes `kept_answer.ClaimClock`'s, so a reply read late dates back).
        started: the job made (or is about to make) its first upstream call: its lease is renewed
            to the full `lease_s` from then on, the short start lease before
            (`turnout.core.kept_answer.lease_ms`).
        renewed_s: this process's monotonic clock when its lease was last set (the claim) or renewed.
        job_id / ingress / keyed: the job, its ingress's reply channel and whether it carries an
            `Idempotency-Key` (`bind_ingress`, once its function read its payload; ingress None before).
        lost: the worker gave the job up unrun, its lease past (`lease_held`): its end writes nothing.
    """

    __slots__ = ("at_s", "ingress", "job", "job_id", "job_try", "keyed", "lost", "now_ms", "renewed_s", "started")

    def __init__(self, job: bytes | None, job_try: int, now_ms: int, at_s: float | None = None) -> None:
        self.job, self.job_try, self.now_ms = job, job_try, now_ms
        self.at_s = self.renewed_s = time.monotonic() if at_s is None else at_s
        self.started = False
        self.lost = False
        self.job_id = ""
        self.ingress: str | None = None  # the reply channel of the job's ingress, once its payload is read
        self.keyed = False

    def lease_held(self, full_lease_s: float) -> bool:
        """Whether the lease still holds by this process's clock (`kept_answer.lease_held`); when not,
        the job is marked `lost`."""
        if not lease_held(self.started, self.renewed_s, time.monotonic(), full_lease_s):
            self.lost = True
        return not self.lost

    def store_now_ms(self) -> int:
        """Redis `TIME` now (epoch ms), extrapolated from the claim with this process's monotonic clock."""
        return self.now_ms + int((time.monotonic() - self.at_s) * 1000)


_CLAIMED: contextvars.ContextVar[Claimed | None] = contextvars.ContextVar("turnout_claimed", default=None)
"""The claim of the job whose run (and function) runs in this context."""


class JobRunner:
    """Runs claimed jobs and the process's life (module doc).

    Args:
        functions: the job functions (`arq.worker.func(...)`), looked up by name.
        redis_url: where Redis is (any form `turnout.state.redis_url` accepts, `redis+sentinel://` too).
        on_startup / on_shutdown: called with `ctx` once the pool is open / when the worker stops.
        on_job_start / after_job_end: called with a job's `ctx` around each run.
        ctx: the worker's context; each job's `ctx` adds `job_id`, `job_try`, `enqueue_time`
            (aware datetime, the ingress's clock), `score` (the queue score, Redis `TIME` ms).
        max_jobs: slots: jobs run at once.
        lease_s: a started job's lease (seconds; `turnout_worker.pickup`); before its start, the short
            `kept_answer.START_LEASE_S`.
        job_timeout: a job's time limit (seconds) when its function sets none.
        poll_delay: seconds between the pickup's scans.
        max_tries: tries of a job when its function sets none; a claim past them drops the job.
        job_completion_wait: seconds a stopping worker waits for its jobs (0: cancel them at once).
        handle_signals: install SIGINT / SIGTERM handlers in `run`.
    """

    def __init__(
        self,
        functions: Sequence[Function],
        *,
        redis_url: str = "redis://127.0.0.1:6379/0",
        on_startup: Hook | None = None,
        on_shutdown: Hook | None = None,
        on_job_start: Hook | None = None,
        after_job_end: Hook | None = None,
        ctx: dict[str, Any] | None = None,
        max_jobs: int = 10,
        lease_s: float = 10.0,
        job_timeout: float = 300,
        poll_delay: float = 0.5,
        max_tries: int = 5,
        job_completion_wait: float = 0,
        handle_signals: bool = True,
    ) -> None:
        self.functions = {f.name: f for f in functions}
        self.redis_url = redis_url
        self.on_startup, self.on_shutdown = on_startup, on_shutdown
        self.on_job_start, self.after_job_end = on_job_start, after_job_end
        self.ctx: dict[str, Any] = ctx if ctx is not None else {}
        self.max_jobs = max_jobs
        self.lease_s = lease_s
        self.sem = asyncio.BoundedSemaphore(max_jobs)
        self.job_counter = 0  # jobs holding a slot (or counted while taking one back)
        self.job_timeout_s = job_timeout
        self.poll_delay_s = poll_delay
        self.max_tries = max_tries
        self.job_completion_wait_s = job_completion_wait
        self.handle_signals = handle_signals
        self.allow_pick_jobs = True
        self.tasks: dict[str, asyncio.Task[None]] = {}  # claimed jobs' runs
        self.claims: dict[str, Claimed] = {}  # their claims (started or not: the lease to renew)
        self._kept: dict[str, int] = {}  # answers kept while Redis is out of reach: job id -> bytes
        self.job_tasks: dict[str, asyncio.Task[Any]] = {}  # their functions, while they run
        self.aborting_tasks: set[str] = set()  # cancelled because the client left
        self._delivered: set[str] = set()
        self._pool: ArqRedis | None = None
        self._store: PickupStore | None = None
        self._main: asyncio.Task[None] | None = None

    @property
    def pool(self) -> ArqRedis:
        """The worker's Redis client (set when `main` starts)."""
        assert self._pool is not None, "the worker has not started"
        return self._pool

    @property
    def store(self) -> PickupStore:
        """The queue's worker side over this worker's pool (set when `main` starts)."""
        assert self._store is not None, "the worker has not started"
        return self._store

    async def main(self) -> None:
        """Serve until cancelled (`turnout_worker.pickup.PushWorker.main`)."""
        raise NotImplementedError

    def run(self) -> None:
        """Run `main` on a new event loop until stopped (SIGINT / SIGTERM), then `close` (blocking)."""
        asyncio.run(self.serve())

    async def serve(self) -> None:
        """Run `main` until it ends or a signal stops it, then `close`."""
        self._main = asyncio.create_task(self.main(), name="turnout-worker-main")
        if self.handle_signals:
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, self.stop, signum)
        try:
            await self._main
        except asyncio.CancelledError:
            pass
        finally:
            await self.close()

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop: no more picks; the jobs in flight get `job_completion_wait` seconds, then are cancelled."""
        self.allow_pick_jobs = False
        log.info("shutdown on %s: %d jobs in flight", signal.Signals(signum).name, len(self.tasks))
        asyncio.get_running_loop().create_task(self._drain(), name="turnout-drain")

    async def _drain(self) -> None:
        if self.tasks and self.job_completion_wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._all_done()), self.job_completion_wait_s)
        for task in list(self.tasks.values()):
            task.cancel()
        if self._main is not None:
            self._main.cancel()

    async def _all_done(self) -> None:
        while self.tasks:
            await asyncio.wait(list(self.tasks.values()))

    async def close(self) -> None:
        """Wait for the runs (cancelled ones give their job back), `on_shutdown`, close the pool."""
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        if self._pool is None:
            return
        if self.on_shutdown:
            await self.on_shutdown(self.ctx)
        await self._pool.aclose()
        self._pool = None

    def _started(self, job_id: str, score: Any, claimed: Claimed) -> asyncio.Task[None]:
        """The run of a claimed job, as a task (the caller holds its slot)."""
        self.claims[job_id] = claimed
        return asyncio.get_running_loop().create_task(self._run_claimed(job_id, int(float(score)), claimed))

    def leases_ms(self, full_lease_s: float) -> dict[str, int]:
        """The lease (ms) each job this worker runs should have now: the full one once started, the
        short start lease before (`kept_answer.lease_ms`)."""
        return {
            job_id: lease_ms(claimed.started, full_lease_s)
            for job_id, claimed in self.claims.items()
            if not (task := self.tasks.get(job_id)) or not task.done()
        }

    async def _run_claimed(self, job_id: str, score: int, claimed: Claimed) -> None:
        token = _CLAIMED.set(claimed)
        try:
            end = await self._run(job_id, score, claimed)
        finally:
            _CLAIMED.reset(token)
            self.claims.pop(job_id, None)
        try:
            if job_id in self._delivered:  # `deliver` finished the job with its answer
                self._delivered.discard(job_id)
            elif claimed.lost:  # given up unrun, its lease past: another worker may hold it now
                log.warning("job %s: its lease lapsed before its start; left to the worker that holds it", job_id)
            elif end == "drop":
                await asyncio.shield(self.store.drop(job_id))
            else:
                await asyncio.shield(self.store.release(job_id))
        except StateUnavailable as exc:  # its lease runs out: a scan re-runs it, which skips or answers
            log.warning("job %s: its end not written (%s)", job_id, exc.kind)

    async def _run(self, job_id: str, score: int, claimed: Claimed) -> str:
        """Run the job's function; "drop" (the job ends) or "release" (another worker runs it again)."""
        if claimed.job is None:
            log.warning("job %s expired", job_id)
            return "drop"
        try:
            envelope = read_job(claimed.job)
        except ValueError:
            log.exception("job %s: unreadable envelope", job_id)
            return "drop"
        function = self.functions.get(envelope.function)
        if function is None:
            log.warning("job %s, function %r not found", job_id, envelope.function)
            return "drop"
        max_tries = self.max_tries if function.max_tries is None else function.max_tries
        if claimed.job_try > max_tries:
            log.warning("job %s: max tries %d exceeded", job_id, max_tries)
            return "drop"
        ctx = {
            **self.ctx,
            "job_id": job_id,
            "job_try": claimed.job_try,
            "enqueue_time": datetime.fromtimestamp(envelope.enqueued_ms / 1000, tz=UTC),
            "score": score,
        }
        if not claimed.lease_held(self.lease_s):  # stalled while it waited for its slot
            return "release"
        if self.on_job_start:
            await self.on_job_start(ctx)
        end = await self._call(job_id, function, ctx, envelope.args, envelope.kwargs)
        if self.after_job_end:
            await self.after_job_end(ctx)
        return end

    async def _call(
        self, job_id: str, function: Function, ctx: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> str:
        timeout_s = self.job_timeout_s if function.timeout_s is None else function.timeout_s
        task = asyncio.get_running_loop().create_task(function.coroutine(ctx, *args, **kwargs))
        self.job_tasks[job_id] = task
        try:
            await asyncio.wait_for(task, timeout_s)
        except asyncio.CancelledError:
            if job_id in self.aborting_tasks:
                self.aborting_tasks.discard(job_id)
                log.info("job %s aborted", job_id)
                return "drop"
            log.info("job %s cancelled, will be run again", job_id)
            return "release"
        except Exception:
            log.exception("job %s failed", job_id)
            return "drop"
        finally:
            del self.job_tasks[job_id]
        return "drop"

    async def deliver(self, job_id: str, reply_to: str, result: bytes, ttl_s: int, release: Sequence[str] = ()) -> None:
        """Store and publish a job's answer and finish the job, in one round trip (`PickupStore.deliver`),
        freeing the concurrency slots of `release` (the request's lease sets) in it.

        After this, a re-run of the job (its worker died before the job's end) finds the stored
        answer and makes no upstream call; the run's own end writes nothing.

        When Redis is out of reach the answer is kept (issue 41, item 2: a paid answer is not thrown
        away): in memory, within `kept_answer.may_keep`'s bounds (a kept answer holds its job's slot,
        so at most `max_jobs`, and `KEEP_MAX_BYTES`), its job's lease renewed at full length meanwhile
        (the run goes on), and delivered again every `retry_delay_s` until Redis takes it or
        `KEEP_S` pass. Delivery is idempotent (`_DELIVER` sets the result, publishes, deletes the job's keys).

        Raises:
            StateUnavailable: Redis unreachable, and the answer not kept (bounds) or let go (`KEEP_S`).
        """
        try:
            await self.store.deliver(job_id, reply_to, result, ttl_s, release)
        except StateUnavailable as exc:
            if not may_keep(len(self._kept), sum(self._kept.values()), len(result), max_answers=self.max_jobs):
                raise
            log.warning("job %s: answer not delivered (%s); kept until Redis is back", job_id, exc.kind)
            await self._deliver_kept(job_id, reply_to, result, ttl_s, release)
        self._delivered.add(job_id)

    async def _deliver_kept(
        self, job_id: str, reply_to: str, result: bytes, ttl_s: int, release: Sequence[str] = ()
    ) -> None:
        """Deliver a kept answer until Redis takes it or `KEEP_S` pass (`deliver`)."""
        claimed = self.claims.get(job_id)
        if claimed is not None:
            claimed.started = True  # an answer waits: the full lease, whatever happened before
        self._kept[job_id] = len(result)
        first = time.monotonic()
        failures = 1
        try:
            while True:
                await asyncio.sleep(retry_delay_s(failures))
                try:
                    await self.store.deliver(job_id, reply_to, result, ttl_s, release)
                except StateUnavailable as exc:
                    failures += 1
                    if not still_kept(first, time.monotonic()):
                        log.error("job %s: kept answer let go after %d deliveries (%s)", job_id, failures, exc.kind)
                        raise
                    continue
                log.info("job %s: kept answer delivered after %.1f s", job_id, time.monotonic() - first)
                return
        finally:
            del self._kept[job_id]

    def lease_held(self) -> bool:
        """Whether the job running in this context still holds its lease by this process's clock
        (`Claimed.lease_held`; True outside a claimed run). A job past it is given up unrun."""
        claimed = _CLAIMED.get()
        return claimed is None or claimed.lease_held(self.lease_s)

    def bind_ingress(self, job_id: str, reply_to: str, keyed: bool) -> None:
        """Note the ingress of the job running in this context (checked before each attempt)."""
        claimed = _CLAIMED.get()
        if claimed is not None:
            claimed.job_id, claimed.ingress, claimed.keyed = job_id, reply_to, keyed

    def running_claim(self) -> Claimed | None:
        """The claim of the job running in this context, if any."""
        return _CLAIMED.get()

    def mark_started(self) -> None:
        """The job running in this context makes its first upstream call (or waits between attempts):
        its lease is renewed at full length from now on (`Claimed.started`)."""
        claimed = _CLAIMED.get()
        if claimed is not None:
            claimed.started = True

    async def store_now_ms(self) -> int:
        """Redis `TIME` now (epoch ms): extrapolated from the running job's claim, else one round trip.

        Raises:
            StateUnavailable: Redis unreachable (the round trip only).
        """
        claimed = _CLAIMED.get()
        if claimed is not None:
            return claimed.store_now_ms()
        return await self.store.now_ms()
