"""Breaker snapshot writes, batched per subject (issue: Performance; SPEC §5).

Owns: the compare-and-set writes of changes to each subject's snapshot (a
target or a tenant credential), starting from the latest snapshot the process
has seen of it (`turnout.health.seen`). Changes
of one subject queued while a write is in flight go together in the next
write, applied in arrival order to the latest snapshot seen: the same
snapshot as writing them one by one, in one round trip. Plain successes
(quiet changes) wait up to `QUIET_WINDOW_S` for company before their write;
anything else is written at once. A write runs in its
own task, so a caller that stops waiting loses nothing queued. The decisions
(what a change is, what it announces) come from the caller;
`turnout.health.results` is the one caller. Clock and RNG are injected.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from turnout.core.breaker import BreakerSnapshot
from turnout.health.seen import LatestSeen
from turnout.state.breaker_store import BreakerStore, SpeedSample, Versioned
from turnout.state.errors import StateUnavailable

if TYPE_CHECKING:
    from turnout.health.view import HealthView

log = logging.getLogger("turnout.breaker")

CAS_TRIES = 100
"""Compare-and-set rounds one batch may lose before it is given up (logged)."""
QUIET_WINDOW_S = 0.1
"""Longest a subject's quiet changes (plain successes) wait for more to join their write (seconds).

A change that is not quiet ends the wait at once, and `drain` ends every wait.
Measured in bench/README.md ("Plain successes written together")."""

Change = Callable[[BreakerSnapshot, float], BreakerSnapshot]
"""A pure change of a snapshot at a store-clock time (epoch seconds)."""


class _Queued(NamedTuple):
    """One change of a subject's snapshot waiting for its writer."""

    change: Change
    now: float  # the store clock when it was queued (epoch seconds)
    view: HealthView  # the request's view: gets the written snapshot
    speed: SpeedSample | None
    quiet: bool  # a plain success: nothing the other processes must hear of at once
    done: asyncio.Future[bool]  # True when the write carried `speed`


def standing_changed(old: BreakerSnapshot, new: BreakerSnapshot) -> bool:
    """Whether a write moves what admission reads: a trip or close, a new cooldown, a rest, slow start."""
    return (old.open, old.opened_at_s, old.not_before_s, old.closed_at_s, old.trips) != (
        new.open,
        new.opened_at_s,
        new.not_before_s,
        new.closed_at_s,
        new.trips,
    )


def _retrieved(done: asyncio.Future[bool]) -> None:
    """Mark a failed change's exception as seen (its caller may have stopped waiting)."""
    if not done.cancelled():
        done.exception()


class SnapshotWrites:
    """Batched compare-and-set writes of breaker snapshots.

    Args:
        store: where snapshots live.
        seen: the latest snapshot the process has seen per subject (read and kept up to date).
        clock: monotonic seconds (when a snapshot was seen).
        rng: jitter of the backoff between conflicting writes.
        on_written: called after a stored write with (subject, the snapshot before, each
            step's (snapshot, store-clock time) in order): transitions and their hooks.
        on_announced: called after a stored write that was announced (the process's own
            kept reads are dropped as the others' are).
        on_lost: called with (subject, exception) when a batch nobody waits for fails.
        quiet_window_s: longest quiet changes wait for company before their write
            (seconds, >= 0; `QUIET_WINDOW_S`). 0 writes them at once.
    """

    def __init__(
        self,
        store: BreakerStore,
        seen: LatestSeen,
        *,
        clock: Callable[[], float],
        rng: random.Random,
        on_written: Callable[[str, BreakerSnapshot, list[tuple[BreakerSnapshot, float]]], None],
        on_announced: Callable[[str], None],
        on_lost: Callable[[str, Exception], None],
        quiet_window_s: float = QUIET_WINDOW_S,
    ) -> None:
        self._store = store
        self._quiet_window_s = quiet_window_s
        self._hurry: dict[str, asyncio.Event] = {}  # subject -> ends its writer's quiet wait
        self._draining = 0  # `drain` calls under way: no quiet wait begins
        self._clock = clock
        self._rng = rng
        self._on_written = on_written
        self._on_announced = on_announced
        self._on_lost = on_lost
        self._seen = seen
        self._queued: dict[str, list[_Queued]] = {}  # subject -> changes waiting for its writer
        self._writers: dict[str, asyncio.Task[None]] = {}  # subject -> its writer task

    async def update(
        self, subject: str, view: HealthView, change: Change, speed: SpeedSample | None, *, quiet: bool
    ) -> bool:
        """Queue `change` of `subject` and write it with whatever else is queued (see module doc).

        A write is announced (`notify`) unless every change it carries is `quiet` and none
        changed the subject's standing (`standing_changed`). A `quiet` change is not waited
        for: it returns once queued, True when it has `speed` to carry.

        Returns:
            True when a write carried `speed`.

        Raises:
            StateUnavailable: the store failed the write.
        """
        self._seen.note(subject, view.entries.get(subject), view.read_at)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        done.add_done_callback(_retrieved)
        self._queued.setdefault(subject, []).append(_Queued(change, view.store_now(), view, speed, quiet, done))
        writer = self._writers.get(subject)
        if writer is None or writer.done() or writer.get_loop() is not loop:
            self._writers[subject] = loop.create_task(self._write_queued(subject), name=f"breaker-write {subject}")
        elif not quiet and (hurry := self._hurry.get(subject)) is not None:
            hurry.set()  # news: written now, with the quiet changes queued before it
        if quiet:  # nobody need wait for it: the answer goes out while it is written (`drain` waits)
            return speed is not None
        return await asyncio.shield(done)

    async def drain(self) -> None:
        """Wait until every change queued so far is written (or failed): a process stopping, a test.
        Quiet changes waiting for company are written at once."""
        self._draining += 1
        try:
            while self._writers:
                for hurry in self._hurry.values():
                    hurry.set()
                await asyncio.wait(list(self._writers.values()))
        finally:
            self._draining -= 1

    async def _write_queued(self, subject: str) -> None:
        """Write `subject`'s queued changes, a batch per round trip, until none is left.

        When only quiet changes are queued, the first write waits up to the quiet
        window for more of them (other jobs' successes) to join it: a success
        changes no standing, so its write may come later, and one write then
        carries many (one round trip instead of one per success, measured).
        """
        try:
            if (
                self._quiet_window_s > 0
                and not self._draining
                and all(item.quiet for item in self._queued.get(subject, ()))
            ):
                hurry = self._hurry[subject] = asyncio.Event()
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._quiet_window_s):
                            await hurry.wait()
                finally:
                    del self._hurry[subject]
            while batch := self._queued.pop(subject, None):
                try:
                    carried = await self._commit(subject, batch)
                except Exception as exc:  # noqa: BLE001 - handed to every caller of the batch, which re-raises it
                    for item in batch:
                        if not item.done.done():
                            item.done.set_exception(exc)
                    if all(item.quiet for item in batch):  # nobody waits to see it
                        self._on_lost(subject, exc)
                    continue
                for item in batch:
                    if not item.done.done():
                        item.done.set_result(carried and item.speed is not None)
        finally:
            self._writers.pop(subject, None)
            for item in self._queued.pop(subject, ()):  # cancelled (process stopping): nothing waits on
                if not item.done.done():
                    item.done.cancel()

    async def _commit(self, subject: str, batch: list[_Queued]) -> bool:
        """One compare-and-set of `batch`'s changes applied in order (retried on conflict with
        jittered backoff). Returns True when the write carried the batch's speed samples."""
        entry = self._seen.latest(subject)
        speeds = [item.speed for item in batch if item.speed is not None]
        carried = False
        now = batch[0].now
        for attempt in range(CAS_TRIES):
            if attempt >= 2:  # heavy contention: spread the writers out (full jitter, ≤ 20 ms)
                await asyncio.sleep(self._rng.uniform(0, min(0.02, 0.001 * 2 ** (attempt - 2))))
            steps: list[tuple[BreakerSnapshot, float]] = []
            snap = entry.snapshot
            for item in batch:
                now = max(now, item.now) if attempt == 0 else now  # the store clock never runs back
                snap = item.change(snap, now)
                steps.append((snap, now))
            if snap == entry.snapshot:
                return False
            notify = not all(item.quiet for item in batch) or standing_changed(entry.snapshot, snap)
            current = await self._store.compare_and_set(subject, entry.version, snap, speeds or None, notify=notify)
            carried = carried or bool(speeds)
            if current is None:
                committed = Versioned(entry.version + 1, snap)
                self._seen.note(subject, committed, self._clock())
                if notify:
                    self._on_announced(subject)
                for item in batch:
                    item.view.entries[subject] = committed
                self._on_written(subject, entry.snapshot, steps)
                return carried
            speeds = []  # folded by the refused write already (the script folds them whatever its outcome)
            entry, now = current.entries[subject], current.now_s
            self._seen.note(subject, entry, self._clock())
        log.error("breaker %s: result not recorded after %d conflicting writes", subject, CAS_TRIES)
        return carried


def lost_write_logger(outage: Callable[[BaseException], None]) -> Callable[[str, Exception], None]:
    """`on_lost` for `SnapshotWrites`: a store outage goes to `outage`, anything else is logged."""

    def lost(subject: str, exc: Exception) -> None:
        if isinstance(exc, (StateUnavailable, TimeoutError)):
            outage(exc)
        else:
            log.error("breaker %s: successes not recorded", subject, exc_info=exc)

    return lost
