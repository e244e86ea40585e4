"""Health-score samples of the dashboard in Redis: a small ring per target.

Owns: writing a sample of each target's health score into a per-target Redis
list (`turnout:ui:score:<target>`, newest first, at most `KEEP` samples, at
most one per target every `INTERVAL_S`, guarded fleet-wide by a `SET NX PX`
tick key) and reading the rings back. Both functions raise
`StateUnavailable` when Redis is unreachable.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors

INTERVAL_S = 10.0
KEEP = 60
TTL_S = 3600
"""A ring nobody samples for an hour is dropped."""

_SAMPLE = """
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then
  redis.call('LPUSH', KEYS[1], ARGV[1])
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return 1
end
return 0
"""


async def sample(redis: Redis, scores: Sequence[tuple[str, float]], now_s: float) -> None:
    """Record `(target, score)` pairs at `now_s` (epoch s) where the target's last sample is older than `INTERVAL_S`.

    Raises:
        StateUnavailable: Redis unreachable.
    """
    script = redis.register_script(_SAMPLE)
    with state_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for target, score in scores:
                await script(
                    keys=[keys.ui_score_key(target), keys.ui_score_tick_key(target)],
                    args=[f"{now_s:.3f}:{score:.4f}", KEEP, int(INTERVAL_S * 1000) - 50, TTL_S],
                    client=pipe,
                )
            await pipe.execute()


async def read(redis: Redis, targets: Sequence[str]) -> dict[str, list[tuple[float, float]]]:
    """Each target's samples `(epoch s, score 0..1)`, oldest first (empty when none).

    Raises:
        StateUnavailable: Redis unreachable.
    """
    with state_errors():
        async with redis.pipeline(transaction=False) as pipe:
            for target in targets:
                pipe.lrange(keys.ui_score_key(target), 0, KEEP - 1)
            raw = await pipe.execute()
    out: dict[str, list[tuple[float, float]]] = {}
    for target, items in zip(targets, raw, strict=True):
        points = []
        for item in items:
            ts, _, value = item.decode().partition(":")
            try:
                points.append((float(ts), float(value)))
            except ValueError:
                continue
        out[target] = sorted(points)
    return out
