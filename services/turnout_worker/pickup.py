"""The worker's pickup: which job to claim and when, woken by a doorbell instead of a poll timer.

Owns: filling the worker's slots from the queue (`turnout.state.jobs`, the only code that
touches the queue's keys); the claimed jobs run in `turnout_worker.runner` (this class's base).
arq's stock loop sleeps `poll_delay` between scans and claims each candidate with a WATCH/MULTI
transaction of four round trips, first in first out. Here:

- **fair share between orgs** (SPEC §10): the ingress puts each job in its
  org's fair queue too (`keys.fair_org_key`, oldest first) and the org
  on a ring of orgs with waiting jobs; free slots are filled by one Lua call
  (`_PICK`) that takes the oldest job of the org at the head of the ring and
  moves that org to the tail, slot after slot. One org's backlog therefore
  delays another org's job by at most one job per org ahead of it on the
  ring (a slot freeing), never by the backlog's length;
- a doorbell ring wakes one worker, not all: the ingress pushes one entry
  per job on a list (`keys.DOORBELL`) and a worker with a free slot
  takes one (`BLMOVE` into its own list) and picks in the same round trip
  (one pipeline: Redis runs the pick as soon as the block ends); a worker
  with no free slot does not wait on the list, so the entry waits for one
  that has. The pick removes the entries of the extra jobs it claimed, and
  all of them once no job waits, so the list stays about one entry per
  waiting job; after a block that timed out (`DOORBELL_BLOCK_S`) the pick
  still runs, claiming any job that waits without an entry;
- a job's end lets the doorbell wait again: with jobs waiting their entries
  are there, so the freed slot is filled at once;
- the periodic scan (every `poll_delay`) does the same, then claims jobs of
  the queue that are in no fair queue (one re-queued after its worker
  died or was stopped), oldest first (`PickupStore.due`, `PickupStore.claim`:
  lease check, queue score check against Redis `TIME`, the lease, the try
  counted and the envelope read, one script per job);
- a heartbeat every 2 s publishes the worker's slots and the mean time its
  recent served jobs took (`service_times`, fed by the job function; a job
  skipped or cut by its deadline does not count) (`turnout.state.fleet`),
  from which the ingress estimates a new job's wait and sheds it at the door
  when it cannot be served within the job's budget;
- a cancel message for a running job cancels its task (the client went away;
  a job claimed here whose function has not started yet skips at start; the
  ingress has already withdrawn a job still queued);
- a job's answer is stored, published and the job's keys removed in one
  Lua round trip (`deliver`);
- a worker's fair picks claim at most its free slots (`worker_max_jobs`
  minus the jobs it runs and the slots promised to the fair picks in
  flight: the doorbell's, which waits for a ring, and the scan's), and its
  slot semaphore admits exactly `worker_max_jobs`.
  The scan's claim of re-queued jobs does not wait for the doorbell's
  promise (it would wait as long as the worker is idle): when both claim at
  once, a job may be claimed beyond the free slots, and waits for one with
  its lease renewed;
- a job waiting 1 s or more before its next attempt (a backoff, a
  provider's `Retry-After`) lends its slot to the next queued job meanwhile;
- the lease of a running job (or one claimed and waiting for its slot)
  lives `lease_s` (default 10 s) and is renewed every `lease_s / 3` while
  the worker lives. (arq's stock lease is the job timeout + 10 s, here 195 s:
  a job whose worker was killed would wait minutes for a re-run, past its
  client's deadline.) With the renewed lease another worker's scan re-runs
  it within `lease_s` + 1 s. The bound on duplicate upstream calls: the dead
  worker's in-flight attempt, once.

Must not import: FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from typing import Any

from arq.connections import ArqRedis

from turnout.core.kept_answer import START_RENEW_S, ClaimClock, lease_ms
from turnout.core.liveness import may_run
from turnout.core.queue_wait import RecentServiceTimes
from turnout.state import keys
from turnout.state.clients import async_client
from turnout.state.errors import StateUnavailable
from turnout.state.fleet import FleetBeat
from turnout.state.jobs import ADOPT_EVERY_SCANS, IngressWatch, LegacyJobs, Picked, PickupStore
from turnout.state.listen import Backoff, Message, listen_forever
from turnout.state.redis_url import location
from turnout_worker.connect import connect_when_ready
from turnout_worker.runner import Claimed, JobRunner
from turnout_worker.start_gate import START_PASSES, StartGate, leave

__all__ = ["Claimed", "PushWorker"]

log = logging.getLogger("turnout.worker")

DOORBELL_BLOCK_S = 1
"""Longest one wait on the doorbell (`BLMOVE`) blocks (seconds) before its pick runs and it is issued again."""

DOORBELL_BACKOFF = Backoff()
"""The doorbell's retry backoff after a lost Redis (jittered, as every listener's: `turnout.state.listen`)."""

SLOT_FREE_WAIT_S = 1.0
"""A job's wait this long or longer (seconds) frees its slot while it lasts (`PushWorker.sleep_off_slot`)."""

CONNECT_TIMEOUT_S = 1.0
"""Longest the worker's connect to Redis (or to a sentinel, at most its own bound) waits (seconds)."""

SCAN_LIMIT_MIN = 100
"""Fewest queued job ids one scan reads (`max(5 * max_jobs, SCAN_LIMIT_MIN)`, arq's figures)."""


class PushWorker(JobRunner):
    """The job runner with doorbell pickup, fair picks and renewed leases (module doc; arguments:
    `JobRunner`'s, and `lease_s` seconds, `start_passes` of the start gate, `rng` for jitter)."""

    def __init__(
        self,
        *args: Any,
        start_passes: int = START_PASSES,
        rng: random.Random | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.start_gate = StartGate(start_passes)
        self._rng = rng or random.Random()
        self._renewer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._claiming = asyncio.Lock()  # one claim at a time: free slots are counted before claiming
        self._want_pick = asyncio.Event()
        self._picker: asyncio.Task[None] | None = None
        self._client_left: collections.deque[str] = collections.deque(maxlen=1024)
        self._slots_owed = 0  # jobs running without a slot, cancelled during `sleep_off_slot`
        self._waiting: set[str] = set()  # claimed, waiting for a slot (renewed like running jobs)
        self._promised = 0  # free slots promised to the fair picks in flight (the doorbell's, the scan's)
        self._pop_again = asyncio.Event()  # a slot freed: the doorbell may wait for a ring again
        self._doorbell: asyncio.Task[None] | None = None
        self.service_times = RecentServiceTimes()  # fed by the job function: jobs that were served
        self.fleet_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._taken_key = keys.doorbell_taken_key(self.fleet_id)
        self._beat: FleetBeat | None = None
        self._legacy: LegacyJobs | None = None
        self._scans = 0
        self._claim_clock = ClaimClock()
        self._ingresses: IngressWatch | None = None
        self._lease_set_ms: dict[str, int] = {}  # the lease each job's last renewal set (ms)
        self._adopt_every = 1  # the first scan looks for jobs the previous version left

    async def open_pool(self, url: str) -> ArqRedis:
        """A client of arq's class (`ArqRedis`) for `url` (`turnout.state.clients.async_client`:
        a `BufferCheckedPool`, or the primary a `redis+sentinel://` URL's sentinels name), once it
        answers PING (connect timeout `CONNECT_TIMEOUT_S`, as arq's `create_pool`).

        Raises:
            What redis-py raises when Redis (or every sentinel) does not answer the PING
            (`connect_when_ready` logs it and tries again).
        """
        pool = async_client(url, redis_class=ArqRedis, socket_connect_timeout=CONNECT_TIMEOUT_S)
        try:
            await pool.ping()
        except BaseException:
            await pool.aclose()
            raise
        return pool

    async def main(self) -> None:
        """Run until stopped: wait for Redis (`connect_when_ready`), startup hook, doorbell listener, scan loop."""
        if self._pool is None:
            self._pool = await connect_when_ready(
                lambda: self.open_pool(self.redis_url),
                where=location(self.redis_url),
                rng=self._rng,
            )
        self._store = PickupStore(self.pool, keys.QUEUE, lease_ms(False, self.lease_s) / 1000)
        self._legacy = LegacyJobs(self.pool)
        self.ctx["redis"] = self.pool
        self.ctx["worker"] = self
        if self.on_startup:
            await self.on_startup(self.ctx)
        self._listener = asyncio.create_task(self._listen(), name="turnout-cancel-listener")
        self._doorbell = asyncio.create_task(self._answer_doorbell(), name="turnout-doorbell")
        self._renewer = asyncio.create_task(self._renew_leases(), name="turnout-lease-renewal")
        self._picker = asyncio.create_task(self._pick_when_wanted(), name="turnout-fair-pick")
        self._beat = FleetBeat(self.pool, self.fleet_id, self.max_jobs, self.service_times.mean_ms)
        self._beat.start()
        self._ingresses = IngressWatch(self.pool)
        self._ingresses.start()
        log.info("worker ready: max_jobs=%d scan every %.1f s", self.max_jobs, self.poll_delay_s)
        try:
            while True:
                await asyncio.sleep(self.poll_delay_s)
                try:
                    await self.scan()
                except StateUnavailable as exc:
                    log.warning("queue scan failed (%s); retrying", exc.kind)
                    await asyncio.sleep(0.2)
        finally:
            await self._beat.stop()
            if self._ingresses is not None:
                await self._ingresses.stop()
            for task in (self._listener, self._doorbell, self._renewer, self._picker):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _listen(self) -> None:
        await listen_forever(
            self.pool,
            [keys.CANCEL_CHANNEL],
            self._cancelled,
            name="cancel listener",
            rng=self._rng,
        )

    async def _cancelled(self, message: Message | None) -> None:
        """A cancel message: the job's client left."""
        if message is not None:
            self._cancel(message["data"].decode())

    def _free_slots(self) -> int:
        return self.max_jobs - self.job_counter if self.allow_pick_jobs else 0

    async def _answer_doorbell(self) -> None:
        """Wait for a doorbell entry while a slot is free, and pick, in one round trip each time.

        One enqueue pushes one entry, so one ring wakes one worker. A worker
        without a free slot waits for one to free (or `poll_delay`) before it
        waits on the doorbell again; the job that rang is then picked by
        whoever takes its entry, by this worker's next job end, or by a scan.
        """
        failures = 0
        self._want_pick.set()  # catch up on anything enqueued before this worker started
        while True:
            free = self._fair_free()
            if free <= 0:  # every free slot is promised to a pick in flight, or none is free
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._pop_again.wait(), self.poll_delay_s)
                self._pop_again.clear()
                continue
            self._promised += free
            try:
                now_ms, picked = await self.store.ring_and_pick(self._taken_key, DOORBELL_BLOCK_S, free)
                if not picked:
                    self._claim_clock.claimed_at_s(now_ms, time.monotonic())  # a sample of the clocks' offset
                for job in picked:
                    await self._start(job.job_id, job.score, self._claimed(job, now_ms))
            except StateUnavailable as exc:
                failures += 1
                delay = DOORBELL_BACKOFF.delay_s(failures, self._rng.random())
                log.warning("doorbell lost Redis (%s); retrying in %.2f s", exc.kind, delay)
                await asyncio.sleep(delay)
                continue
            finally:
                self._promised -= free
            failures = 0

    def _claimed(self, job: Picked, now_ms: int) -> Claimed:
        """The claim of `job` read in a reply carrying Redis `TIME` `now_ms`, dated by `ClaimClock`
        (a reply read after a stall dates back to when Redis ran it: its start lease may be past)."""
        return Claimed(job.job, job.job_try, now_ms, self._claim_clock.claimed_at_s(now_ms, time.monotonic()))

    def _fair_free(self) -> int:
        """Free slots not promised to a fair pick in flight."""
        return self._free_slots() - self._promised

    async def _renew_leases(self) -> None:
        """Keep the in-progress keys of this worker's jobs alive: every `START_RENEW_S` the claimed,
        not started ones (waiting for a slot, or before their first upstream call) with the short start
        lease, and every `lease_s / 3` the started ones (or with an answer kept) with the full lease
        (`kept_answer.lease_ms`). A stalled worker's unstarted jobs so go to another within
        `START_LEASE_S` (+ a scan); its started ones wait the full lease (their call may be paid)."""
        full_every = max(1, round(self.lease_s / 3 / START_RENEW_S))
        ticks = 0
        while True:
            await asyncio.sleep(START_RENEW_S)
            ticks += 1
            full_ms = int(self.lease_s * 1000)
            leases = self.leases_ms(self.lease_s)  # the claims waiting for a slot too (`_start`)
            due = {  # the short ones, the full ones on their turn, and a lease just made full (it still has the short one)
                job_id: ms
                for job_id, ms in leases.items()
                if ms < full_ms or ticks % full_every == 0 or self._lease_set_ms.get(job_id) != ms
            }
            if not due:
                continue
            sent_s = time.monotonic()
            try:
                await self.store.renew_leases(due)
            except StateUnavailable as exc:
                log.warning("lease renewal failed (%s); retrying", exc.kind)
                continue
            for job_id, ms in due.items():
                if (claimed := self.claims.get(job_id)) is not None:
                    claimed.renewed_s = sent_s
                    self._lease_set_ms[job_id] = ms
            for job_id in set(self._lease_set_ms) - set(leases):  # ended
                del self._lease_set_ms[job_id]

    async def _pick_when_wanted(self) -> None:
        """Fill free slots from the fair queues whenever a doorbell rings or a job ends."""
        while True:
            await self._want_pick.wait()
            self._want_pick.clear()
            try:
                await self.pick_fair()
            except StateUnavailable as exc:
                log.warning("fair pick failed (%s); the scan will retry", exc.kind)

    async def pick_fair(self) -> None:
        """Claim up to the free slots not promised to the doorbell's pick from the orgs' fair
        queues, round robin, in one Lua call (the scan, a slot lent during a long wait, the start)."""
        async with self._claiming:
            free = self._fair_free()
            if free <= 0:
                return
            self._promised += free
            try:
                now_ms, picked = await self.store.pick(free)
                for job in picked:
                    await self._start(job.job_id, job.score, self._claimed(job, now_ms))
            finally:
                self._promised -= free
                self._pop_again.set()  # the slots it promised and did not fill are free for the doorbell again

    async def scan(self) -> None:
        """The periodic scan: the fair queues first, then the queue's jobs in no fair queue (re-queued
        after their worker died or stopped, or adopted from the previous version's layout:
        `turnout.state.jobs.legacy`), oldest first, up to the free slots.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        await self.pick_fair()
        self._scans += 1
        if self._legacy is not None and self._scans % self._adopt_every == 0 and self.allow_pick_jobs:
            adopted, left = await self._legacy.adopt()
            self._adopt_every = 1 if left else ADOPT_EVERY_SCANS
            if adopted:
                log.info("adopted %d job(s) queued by the previous version (%d left to it)", adopted, left)
        async with self._claiming:
            free = self._free_slots()
            if free <= 0:
                return
            due = await self.store.due(max(5 * self.max_jobs, SCAN_LIMIT_MIN))
            candidates = [job_id for job_id in due if job_id not in self.tasks][:free]
            if not candidates:
                return
            now_ms, claimed = await self.store.claim(candidates)
            for job in claimed:
                await self._start(job.job_id, job.score, self._claimed(job, now_ms))

    async def _start(self, job_id: str, score: Any, claimed: Claimed) -> None:
        self._waiting.add(job_id)  # claimed, its lease renewed while it waits for a slot
        self.claims[job_id] = claimed
        try:
            await self.sem.acquire()
        except BaseException:
            self.claims.pop(job_id, None)
            raise
        finally:
            self._waiting.discard(job_id)
        self.job_counter += 1
        task = self._started(job_id, score, claimed)
        task.add_done_callback(lambda _: self._ended(job_id))
        self.tasks[job_id] = task

    def _ended(self, job_id: str = "") -> None:
        self.tasks.pop(job_id, None)
        self.job_counter -= 1
        if self._slots_owed:  # a job that ended without holding a slot (`sleep_off_slot`)
            self._slots_owed -= 1
        else:
            self.sem.release()
        self._pop_again.set()  # a slot is free: the doorbell pops again, and a waiting job's entry starts it now

    async def sleep_off_slot(self, delay_s: float) -> None:
        """A job's wait (backoff, `Retry-After`) that frees its slot when long.

        The router's injected sleep. A wait of `SLOT_FREE_WAIT_S` (1 s) or
        more gives the job's slot to the next queued job while it lasts; at
        its end the job takes a slot back before calling upstream again, so
        the worker never calls upstream for more than `max_jobs` jobs at
        once; a job cancelled during the wait (or while taking a slot back)
        ends without one, and its end releases none. The job stays claimed
        (its lease is renewed) throughout. Shorter waits keep the slot.

        Args:
            delay_s: seconds to wait (>= 0).
        """
        if delay_s < SLOT_FREE_WAIT_S:
            await asyncio.sleep(delay_s)
            return
        self.job_counter -= 1
        self.sem.release()
        self._want_pick.set()
        self._pop_again.set()
        try:
            await asyncio.sleep(delay_s)
        except BaseException:
            self.job_counter += 1
            self._slots_owed += 1  # cancelled while waiting (client gone): it ends without taking a slot back
            raise
        self.job_counter += 1  # counted before the slot is held, so no claim takes the slot meanwhile
        try:
            await self.sem.acquire()
        except BaseException:
            self._slots_owed += 1  # cancelled without a slot: its end must not release one
            raise

    def paused(self) -> None:
        """The router's `paused` hook: the running job is about to make an upstream call, or to
        wait between attempts. Gives its start-gate pass back (`start_gate.leave`) and marks it
        started (its lease renewed at full length from the next renewal, `_renew_leases`); a job
        whose ingress is gone (`liveness.may_run`) is cancelled there, before the call, and dropped."""
        leave()
        self.mark_started()
        claimed = self.running_claim()
        if (
            claimed is not None
            and claimed.ingress is not None
            and not may_run(claimed.keyed, self.ingress_gone(claimed.ingress))
        ):
            log.info("job %s withdrawn: its ingress is gone", claimed.job_id)
            self._cancel(claimed.job_id)

    def ingress_gone(self, reply_to: str) -> bool:
        """Whether the ingress listening on `reply_to` is gone, by the last read of the leases
        (`IngressWatch`, every `WATCH_EVERY_S`)."""
        return self._ingresses is not None and reply_to in self._ingresses.gone

    def _cancel(self, job_id: str) -> None:
        task = self.job_tasks.get(job_id)
        if task is not None and not task.done():
            log.info("job %s cancelled: client went away", job_id)
            self.aborting_tasks.add(job_id)
            task.cancel()
        elif job_id in self.tasks:  # claimed, its function not started yet: it skips at start
            self._client_left.append(job_id)

    def client_left(self, job_id: str) -> bool:
        """True if `job_id`'s client left before the job's function started here."""
        return job_id in self._client_left
