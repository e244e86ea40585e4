"""A queued job's bytes and clock: the envelope the ingress writes and the worker reads.

Owns: the job envelope (msgpack of `{"t": try, "f": function, "a": args, "k": kwargs, "et":
enqueued ms}`, the layout arq 0.28's `serialize_job` writes with Turnout's serializer, so a job
enqueued by the previous version reads the same), how much time a job's client has left on
Redis's clock, and Redis `TIME` itself.
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
from redis.asyncio import Redis

from turnout.state.errors import state_errors
from turnout.wire import JobPayload, payload_encoder

JOB_FUNCTION = "chat_completion"
"""Name of the job function that serves a non-streaming chat job."""


job_serializer = payload_encoder.encode
"""The job envelope's serializer (msgpack), shared by ingress and worker."""


class JobBytes(bytes):
    """A job's payload bytes whose `repr` names only their length.

    A runner that formats a job's arguments for a log line (arq does, for
    its start line, before it checks the log level) would otherwise copy
    the payload (the client's request) into that string, and into the log.
    """

    def __repr__(self) -> str:
        return f"<job payload: {len(self)} bytes>"


def job_deserializer(data: bytes) -> dict[str, Any]:
    """The job envelope's deserializer (msgpack); the job's byte arguments come back as `JobBytes`.

    Raises:
        msgspec.DecodeError: `data` is not msgpack.
    """
    decoded: dict[str, Any] = msgspec.msgpack.decode(data)
    args = decoded.get("a")
    if isinstance(args, list):
        decoded["a"] = [JobBytes(a) if isinstance(a, bytes) else a for a in args]
    return decoded


def encode_job(payload: JobPayload, enqueued_ms: int) -> bytes:
    """The envelope of a chat job carrying `payload`, stamped `enqueued_ms` (epoch ms, the ingress's clock).

    Byte for byte what arq 0.28's `serialize_job(JOB_FUNCTION, (encoded payload,), {}, None,
    enqueued_ms, serializer=job_serializer)` writes.
    """
    envelope: dict[str, object] = {
        "t": None,
        "f": JOB_FUNCTION,
        "a": (payload_encoder.encode(payload),),
        "k": {},
        "et": enqueued_ms,
    }
    return job_serializer(envelope)


class Envelope(NamedTuple):
    """A job read back (`read_job`).

    Attributes:
        function: the job function's name.
        args: its positional arguments (bytes as `JobBytes`).
        kwargs: its keyword arguments.
        enqueued_ms: when the ingress enqueued it (epoch ms, the ingress's clock).
    """

    function: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    enqueued_ms: int


def read_job(data: bytes) -> Envelope:
    """Read a job's envelope.

    Raises:
        ValueError: not an envelope (undecodable, or a field missing or of the wrong type).
    """
    try:
        decoded = job_deserializer(data)
        function, args, kwargs, enqueued_ms = decoded["f"], decoded["a"], decoded["k"], decoded["et"]
        if not (isinstance(function, str) and isinstance(args, list) and isinstance(kwargs, dict)):
            raise TypeError("a field has the wrong type")
    except (msgspec.DecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"not a job envelope: {exc}") from exc
    return Envelope(function, tuple(args), kwargs, int(enqueued_ms or 0))


def time_left_s(payload: JobPayload, enqueued_ms: int, now_ms: int) -> float:
    """Seconds the client of `payload` still waits, on Redis's clock.

    Args:
        payload: the job; its `budget_ms` was stamped at enqueue.
        enqueued_ms: the job's queue score (Redis `TIME` at enqueue, epoch ms).
        now_ms: Redis `TIME` now (epoch ms).

    Returns:
        `budget_ms - (now_ms - enqueued_ms)` in seconds; <= 0 once the client
        gave up. Neither the ingress's nor the worker's wall clock enters
        (a worker 30 s off behaves like one on time).
    """
    return (payload.budget_ms - (now_ms - enqueued_ms)) / 1000


async def redis_now_ms(redis: Redis) -> int:
    """Redis `TIME` in epoch milliseconds (one round trip).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    with state_errors():
        seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000
