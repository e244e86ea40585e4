"""Run an admission in the enqueue's own script (`turnout.state.jobs.enqueue_lua.ADMIT_ENQUEUE`)
with a job of org `acme`, as the ingress does for a limited key's queued request."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.jobs.enqueue_lua import ADMIT_ENQUEUE
from turnout.state.limit_store import Admission, AdmitCall


async def admit_enqueue(redis: Redis, call: AdmitCall, *, max_depth: int = 1_000) -> tuple[int, Admission | None]:
    """(the enqueue's code: 1 queued, 2 refused by the admission, -1 queue full; the admission
    read from the reply, None when the queue refused first). The job's id is the lease id."""
    job_id = str(call.args[1])
    job_keys = [
        keys.JOB_PREFIX + job_id,
        keys.QUEUE,
        keys.result_key(job_id),
        keys.fair_org_key("acme"),
        keys.FAIR_RING,
        keys.DOORBELL,
    ]
    job_args: list[Any] = [b"job", 60_000, job_id, max_depth, keys.FAIR_ORG_PREFIX, "acme", -1, 0]
    reply = await redis.eval(  # type: ignore[misc]
        ADMIT_ENQUEUE, len(job_keys) + len(call.keys), *job_keys, *call.keys, *job_args, *(str(a) for a in call.args)
    )
    return int(reply[0]), (call.parse(reply[2]) if len(reply) > 2 else None)
