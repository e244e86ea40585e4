"""The queue as a port: every Redis operation on non-streaming jobs, behind two small objects.

Owns: the job queue. The ingress uses `JobQueue` (`door.py`): `submit` (enqueue with door
shedding, then wait), `join` (another caller's request, `Idempotency-Key`), `cancel`, and
`idempotency` (`idempotency.py`). The worker uses `PickupStore` (`pickup.py`): `ring_and_pick`
and `pick` (the doorbell and the fair pick, round robin across orgs, each claim a lease),
`claim` (a re-queued job), `renew_leases`, `deliver`, `answered`, `now_ms`. Both read and write
the job envelope of `envelope.py`. Redis layout: `turnout.state.keys`.
Must not import: services, FastAPI, httpx.
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
from turnout.state.jobs.pickup import Picked, PickupStore

__all__ = [
    "ABANDON_WAIT_S",
    "ADOPT_EVERY_SCANS",
    "JOB_FUNCTION",
    "Envelope",
    "Idempotency",
    "IdempotencyConflict",
    "JobBytes",
    "JobQueue",
    "LegacyJobs",
    "Picked",
    "PickupStore",
    "encode_job",
    "job_deserializer",
    "job_serializer",
    "read_job",
    "redis_now_ms",
    "time_left_s",
]
