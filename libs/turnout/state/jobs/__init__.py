"""The queue as a port: every Redis operation on non-streaming jobs, behind two small objects.

Owns: the job queue. The ingress uses `JobQueue` (`door.py`): `submit` (enqueue with door
shedding, then wait for the answer), `join` (another caller's request, `Idempotency-Key`),
`cancel`, and `idempotency` (`idempotency.py`: bind and release a key). The worker uses
`PickupStore` (`pickup.py`): `ring_and_pick` and `pick` (the doorbell and the fair pick, round
robin across orgs; each claim sets a lease, counts a try and reads the envelope and Redis
`TIME`), `due` and `claim` (the scan's re-queued jobs), `renew_leases`, `deliver` (store,
publish, finish: one script), `drop` (a job that ends without an answer), `release` (a run this
worker's stop cut: another claims it), `answered`, `now_ms`; and `LegacyJobs` (`legacy.py`),
which adopts the jobs the previous version queued under arq's keys (rolling upgrade: see there).
`liveness.py` is each ingress's liveness lease (`IngressLease`, started with `JobQueue`) and a
worker's view of them (`IngressWatch`). `envelope.py` is a job's bytes and clock. Redis layout: `turnout.state.keys`; every queue key
carries the hash tag `{jobs}` (`keys.JOBS_TAG`), so every script touches one slot (Redis
Cluster ready; `legacy.py`'s one script, which reads the untagged old layout, excepted).

Decision (issue 42, after reading arq 0.28.0): arq stays the worker's library only through
its public API; the runner of claimed jobs is ours (`turnout_worker.runner`). arq's `Worker`
runs only jobs its own loop finds (`_poll_iteration`, then a WATCH/MULTI claim per job on its
fixed `arq:*` keys, lease = job timeout + 10 s, first in first out) and has no public way to
hand it a job one claimed oneself: its `run_job` re-reads the job from `arq:job:<id>` and its
`finish_job` writes `arq:*` keys, both undocumented. Turnout needs a fair pick across orgs, a
short renewed lease (a dead worker's jobs re-run within `job_lease_s` + 1 s), the claim's reads
in the claim's round trip (no more Redis commands per request) and keys under one hash tag —
none of which arq's public surface allows without overriding its private control flow, which
the earlier worker did (`_poll_iteration`, `start_jobs`, `run_job`, `finish_job`,
`_release_sem_dec_counter_on_complete`, and a pool faking `run_job`'s opening pipeline). So
this package owns every queue key and script, the worker's runner is a small asyncio loop, and
arq's public pieces that still serve are kept: `func`/`Function` (job name, coroutine, timeout,
max tries), the `on_startup`/`on_shutdown`/`on_job_start`/`after_job_end` hooks and the job
`ctx` (`job_id`, `job_try`, `enqueue_time`, `score`), and `ArqRedis` (the worker's client class). The
envelope keeps arq's byte layout, so a job the previous version queued reads the same.
Must not import: services, FastAPI, httpx, arq.
"""

from turnout.state.jobs.door import ABANDON_WAIT_S, JobQueue
from turnout.state.jobs.envelope import (
    JOB_FUNCTION,
    Envelope,
    JobBytes,
    encode_job,
    job_deserializer,
    job_serializer,
    read_job,
    redis_now_ms,
    time_left_s,
)
from turnout.state.jobs.idempotency import Idempotency, IdempotencyConflict
from turnout.state.jobs.legacy import ADOPT_EVERY_SCANS, LegacyJobs
from turnout.state.jobs.liveness import IngressLease, IngressWatch
from turnout.state.jobs.pickup import Picked, PickupStore
from turnout.state.jobs.replicated import ReplicaWait

__all__ = [
    "ABANDON_WAIT_S",
    "ADOPT_EVERY_SCANS",
    "JOB_FUNCTION",
    "Envelope",
    "Idempotency",
    "IdempotencyConflict",
    "IngressLease",
    "IngressWatch",
    "JobBytes",
    "JobQueue",
    "LegacyJobs",
    "Picked",
    "PickupStore",
    "ReplicaWait",
    "encode_job",
    "job_deserializer",
    "job_serializer",
    "read_job",
    "redis_now_ms",
    "time_left_s",
]
