"""The ingress's side of the queue under its former name (`turnout.state.jobs` owns it).

Kept so imports of the names below keep working; new code imports `turnout.state.jobs`.
Must not import: services, FastAPI, httpx, arq.
"""

from turnout.state.jobs import (
    JOB_FUNCTION,
    IdempotencyConflict,
    JobBytes,
    JobQueue,
    job_deserializer,
    job_serializer,
    redis_now_ms,
    time_left_s,
)

__all__ = [
    "JOB_FUNCTION",
    "IdempotencyConflict",
    "JobBytes",
    "JobQueue",
    "job_deserializer",
    "job_serializer",
    "redis_now_ms",
    "time_left_s",
]
