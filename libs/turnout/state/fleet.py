"""The fleet's heartbeats: each worker publishes its slots and service time; each ingress reads them.

Owns: the worker's heartbeat (`FleetBeat`: every `interval_s`, one Lua call
writing `<slots>:<service ms>:<expiry>` under its id in `turnout:fleet:workers`,
the expiry on Redis's clock so a skewed worker is judged right) and the
ingress's cached view of the fleet's capacity (`FleetWatch`: one Lua call
every `refresh_s`, off the request path, dropping stale beats). The
estimate from those figures is `turnout.core.queue_wait`.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from redis.asyncio import Redis

from turnout.core.queue_wait import FleetCapacity, WorkerBeat, fleet_capacity
from turnout.state import keys
from turnout.state.errors import STATE_ERRORS, maps_state_errors, state_errors
from turnout.state.periodic import Periodic

log = logging.getLogger("turnout.fleet")

BEAT_INTERVAL_S = 2.0
"""Seconds between two heartbeats of a worker."""

BEAT_TTL_S = 6.0
"""A heartbeat older than this (seconds, Redis time) no longer counts: the worker is gone."""

# KEYS: fleet hash   ARGV: worker id, slots, service ms, ttl ms
_BEAT = """
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('hset', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[3] .. ':' .. (now_ms + tonumber(ARGV[4])))
redis.call('pexpire', KEYS[1], 10 * tonumber(ARGV[4]))
return 1
"""

# KEYS: fleet hash   Returns {now ms, id, beat, id, beat, ...}; beats expired a minute ago are removed.
_READ = """
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now_ms}
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  local expires = tonumber(string.match(all[i + 1], ':(%d+)$') or '0')
  if expires < now_ms - 60000 then redis.call('hdel', KEYS[1], all[i]) else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
"""


def parse_beat(raw: bytes | str) -> WorkerBeat | None:
    """A heartbeat `<slots>:<service ms>:<expires ms>`, or None if malformed."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    try:
        slots, service_ms, expires_ms = text.split(":")
        return WorkerBeat(slots=int(slots), service_ms=float(service_ms), expires_ms=int(expires_ms))
    except ValueError:
        return None


async def read_capacity(redis: Redis) -> FleetCapacity | None:
    """The fleet's capacity now (one round trip), or None without a live worker that served a job.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    with state_errors():
        reply = await redis.register_script(_READ)(keys=[keys.FLEET_WORKERS])
    now_ms, rest = int(reply[0]), reply[1:]
    beats = [b for b in (parse_beat(raw) for raw in rest[1::2]) if b is not None]
    return fleet_capacity(beats, now_ms)


@maps_state_errors
class FleetBeat:
    """A worker's heartbeat task: its slots and recent service time, every `interval_s`.

    Args:
        redis: the worker's client.
        worker_id: unique per worker process.
        slots: its `worker_max_jobs`.
        service_ms: returns the mean service time of its recent jobs (ms, 0 = none yet).
        interval_s: seconds between beats.
    """

    def __init__(
        self,
        redis: Redis,
        worker_id: str,
        slots: int,
        service_ms: Callable[[], float],
        interval_s: float = BEAT_INTERVAL_S,
    ) -> None:
        self._redis = redis
        self._worker_id = worker_id
        self._slots = slots
        self._service_ms = service_ms
        self._script = redis.register_script(_BEAT)
        self._periodic = Periodic("turnout-fleet-beat", self.beat, interval_s)

    async def beat(self) -> None:
        """Write one heartbeat.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        await self._script(
            keys=[keys.FLEET_WORKERS],
            args=[self._worker_id, self._slots, round(self._service_ms(), 1), int(BEAT_TTL_S * 1000)],
        )

    async def leave(self) -> None:
        """Remove this worker's heartbeat (a clean stop; best effort)."""
        with contextlib.suppress(*STATE_ERRORS):
            await self._redis.hdel(keys.FLEET_WORKERS, self._worker_id)  # type: ignore[misc]

    def start(self) -> None:
        """Beat now and every `interval_s` on the running loop."""
        self._periodic.start()

    async def stop(self) -> None:
        """Stop beating and leave the fleet."""
        await self._periodic.stop()
        await self.leave()


@maps_state_errors
class FleetWatch:
    """An ingress's view of the fleet's capacity, refreshed every `refresh_s` off the request path.

    Args:
        redis: the ingress's client.
        refresh_s: seconds between reads.
    """

    def __init__(self, redis: Redis, refresh_s: float = 1.0) -> None:
        self._redis = redis
        self.capacity: FleetCapacity | None = None
        """The last read (None: unknown; the door then sheds on depth only)."""
        self._periodic = Periodic("turnout-fleet-watch", self.refresh, refresh_s)

    async def refresh(self) -> None:
        """Read the capacity now; an unreachable Redis leaves the last value.

        Raises:
            StateUnavailable: Redis unreachable.
        """
        self.capacity = await read_capacity(self._redis)

    def start(self) -> None:
        """Read now and every `refresh_s` on the running loop."""
        self._periodic.start()

    async def stop(self) -> None:
        """Stop reading."""
        await self._periodic.stop()
