"""Where breaker snapshots live: shared Redis, or memory (tests, one process).

Owns: loading snapshots with the store's clock, compare-and-set writes of a
snapshot computed by the pure core (`turnout.core.breaker`), and the probe
permit (`SET NX PX`). One contract test suite runs against both stores.
Must not import: services, FastAPI, httpx.

Redis layout (names in `turnout.state.keys`):
    turnout:breaker:{provider/model}  hash {v: version, s: msgpack snapshot}
    turnout:breaker:credential:{org}:{provider}
                                      the same for a tenant's own credential
    turnout:probe:{provider/model}    the HALF_OPEN probe permit: a random token
                                      with a TTL, renewed and released only by
                                      its holder
    turnout:ramp:{provider/model}     slow start by rate: the theoretical arrival
                                      time (epoch µs) of the target's next call,
                                      shared by the fleet (`take_ramp_slot`)
    turnout:speed:{provider/model}    hash {ttft_ms, tps}: the fleet's rolling
                                      measures of the target (exponentially
                                      weighted moving averages), read with the
                                      snapshots in the same round trip
    turnout:plancap:{scope}:{provider/model}
                                      epoch seconds until which the account
                                      behind `scope` (`shared`, or an org's own
                                      key) is over its usage cap on the target;
                                      expires then (SPEC §10 plan-cap continuity)
Writes are atomic: a Lua script stores the new snapshot only if the version
is still the one it was computed from, else returns the current one, so the
caller recomputes; N workers racing never lose a counted failure.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeAlias

import msgspec
from redis.asyncio import Redis

from turnout.core.breaker import CLOSED, BreakerSnapshot
from turnout.core.health_reads import Loaded, Speed, Versioned
from turnout.core.ramp import rate_slot
from turnout.state import keys
from turnout.state.errors import maps_state_errors

__all__ = [
    "BreakerStore",
    "Loaded",
    "MemoryBreakerStore",
    "RedisBreakerStore",
    "Speed",
    "SpeedSample",
    "SpeedSamples",
    "Versioned",
    "cap_subject",
    "ewma",
    "samples",
]
"""`Loaded`, `Speed` and `Versioned` are the pure core's (`turnout.core.health_reads`), named here
as what a read of the store returns."""

_encode = msgspec.msgpack.Encoder()
_decode = msgspec.msgpack.Decoder(BreakerSnapshot)


class SpeedSample(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt's measures to fold into a target's rolling averages (`BreakerStore.record_speed`).

    Attributes:
        ttft_ms / tokens_per_s: as in `Speed`; None leaves that average as it is.
        alpha: the averages' weight of this sample (0..1).
        ttl_s: the measures expire this many seconds after the last update.
    """

    ttft_ms: float | None
    tokens_per_s: float | None
    alpha: float
    ttl_s: int


SpeedSamples: TypeAlias = SpeedSample | Sequence[SpeedSample] | None
"""What `compare_and_set` folds in: nothing, one sample, or several (in order)."""


def samples(speed: SpeedSamples) -> tuple[SpeedSample, ...]:
    """`speed` as a tuple of samples, in order."""
    if speed is None:
        return ()
    if isinstance(speed, SpeedSample):
        return (speed,)
    return tuple(speed)


def cap_subject(scope: str, target: str) -> str:
    """The name of one (credential scope, target) usage cap in `Loaded.caps`."""
    return f"{scope}:{target}"


def ewma(old: float | None, sample: float, alpha: float) -> float:
    """Exponentially weighted moving average: `old + alpha · (sample - old)`;
    the first sample (old None) is taken as is. The Redis script computes the same."""
    return sample if old is None else old + alpha * (sample - old)


class BreakerStore(Protocol):
    """Storage of breaker snapshots. Target names are `provider/model`."""

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        """Read the snapshots of `targets` (missing ones as version 0, CLOSED),
        their measures (`Loaded.speeds`: only those measured) and the usage
        caps named in `caps` (`cap_subject`; `Loaded.caps`: only those in force)."""
        ...

    async def load_caps(self, subjects: Sequence[str]) -> dict[str, float]:
        """Usage caps in force (`cap_subject` -> until, epoch seconds); see `Loaded.caps`."""
        ...

    async def set_plan_cap(self, subject: str, *, until_s: float, ttl_s: float) -> None:
        """Note that the usage cap `subject` (`cap_subject`) holds until `until_s`
        (epoch seconds); forgotten after `ttl_s` seconds."""
        ...

    async def record_speed(
        self, target: str, *, ttft_ms: float | None, tokens_per_s: float | None, alpha: float, ttl_s: int
    ) -> None:
        """Fold one attempt's measures into the target's rolling averages (`ewma`),
        atomically; the measures expire `ttl_s` seconds after the last update.
        A None measure leaves that average as it is."""
        ...

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        """Store `snapshot` as version+1 if the stored version is `version`; fold
        `speed` (when given: one sample, or several folded in order) into the
        target's measures as `record_speed` does, in the same round trip and
        whatever the write's outcome. With `notify`, a stored write is announced
        on `keys.HEALTH_CHANNEL` (message: `target`) in the same step.

        Returns:
            None when stored; else the current entry (and clock) to recompute from.
        """
        ...

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        """Take the probe permit of `target` for `ttl_s` seconds.

        Returns:
            The permit's token, or None when another holder has it.
        """
        ...

    async def release_probe(self, target: str, token: str) -> None:
        """Give the permit back, only if `token` still holds it (a probe that
        outlived its permit must not free a later holder's)."""
        ...

    async def renew_probe(self, target: str, token: str, ttl_s: float) -> bool:
        """Extend the permit to `ttl_s` seconds from now, only if `token` still holds it.

        Returns:
            True when renewed; False when the permit is gone or held by another.
        """
        ...

    async def take_ramp_slot(self, target: str, rate: float) -> float:
        """Take one call of `target`'s slow start at `rate` calls per second, fleet-wide
        (`turnout.core.ramp.rate_slot`, on the store's clock).

        Returns:
            0.0 when the call may go; else the seconds until one fits.
        """
        ...


class MemoryBreakerStore:
    """In-process store with the same semantics (one process, or tests).

    Args:
        clock: epoch seconds (inject a fake one in tests).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._entries: dict[str, Versioned] = {}
        self._permits: dict[str, tuple[str, float]] = {}
        self._speeds: dict[str, tuple[Speed, float]] = {}
        self._caps: dict[str, tuple[float, float]] = {}
        self._ramps: dict[str, float] = {}

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        """See `BreakerStore.load`."""
        now = self._clock()
        speeds = {t: self._speeds[t][0] for t in targets if t in self._speeds and self._speeds[t][1] > now}
        return Loaded(
            now_s=now,
            entries={t: self._entries.get(t, Versioned(0, CLOSED)) for t in targets},
            speeds=speeds,
            caps=await self.load_caps(caps),
        )

    async def load_caps(self, subjects: Sequence[str]) -> dict[str, float]:
        """See `BreakerStore.load_caps`."""
        now = self._clock()
        return {s: self._caps[s][0] for s in subjects if s in self._caps and self._caps[s][1] > now}

    async def set_plan_cap(self, subject: str, *, until_s: float, ttl_s: float) -> None:
        """See `BreakerStore.set_plan_cap`."""
        self._caps[subject] = (until_s, self._clock() + ttl_s)

    async def record_speed(
        self, target: str, *, ttft_ms: float | None, tokens_per_s: float | None, alpha: float, ttl_s: int
    ) -> None:
        """See `BreakerStore.record_speed`."""
        now = self._clock()
        held = self._speeds.get(target)
        old = held[0] if held is not None and held[1] > now else Speed()
        self._speeds[target] = (
            Speed(
                ttft_ms=old.ttft_ms if ttft_ms is None else ewma(old.ttft_ms, ttft_ms, alpha),
                tokens_per_s=old.tokens_per_s if tokens_per_s is None else ewma(old.tokens_per_s, tokens_per_s, alpha),
            ),
            now + ttl_s,
        )

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        """See `BreakerStore.compare_and_set` (`notify`: nobody listens to a memory store)."""
        for sample in samples(speed):
            await self.record_speed(
                target, ttft_ms=sample.ttft_ms, tokens_per_s=sample.tokens_per_s, alpha=sample.alpha, ttl_s=sample.ttl_s
            )
        current = self._entries.get(target, Versioned(0, CLOSED))
        if current.version != version:
            return Loaded(now_s=self._clock(), entries={target: current})
        self._entries[target] = Versioned(version + 1, snapshot)
        return None

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        """See `BreakerStore.acquire_probe`."""
        now = self._clock()
        held = self._permits.get(target)
        if held is not None and held[1] > now:
            return None
        token = secrets.token_hex(8)
        self._permits[target] = (token, now + ttl_s)
        return token

    async def release_probe(self, target: str, token: str) -> None:
        """See `BreakerStore.release_probe`."""
        held = self._permits.get(target)
        if held is not None and held[0] == token:
            del self._permits[target]

    async def renew_probe(self, target: str, token: str, ttl_s: float) -> bool:
        """See `BreakerStore.renew_probe`."""
        now = self._clock()
        held = self._permits.get(target)
        if held is None or held[0] != token or held[1] <= now:
            return False
        self._permits[target] = (token, now + ttl_s)
        return True

    async def take_ramp_slot(self, target: str, rate: float) -> float:
        """See `BreakerStore.take_ramp_slot`."""
        admitted, tat, wait = rate_slot(self._ramps.get(target, 0.0), self._clock(), rate)
        self._ramps[target] = tat
        return 0.0 if admitted else wait


# Folds (field, sample) pairs of ARGV from index `first` into the speed hash `key`, in order (a field
# may come several times: one EWMA step each) with weight `a`; the hash expires `ttl` seconds later.
_FOLD_SPEED = """
local function fold_speed(key, a, ttl, first)
  for i = first, #ARGV, 2 do
    local x = tonumber(ARGV[i + 1])
    local old = tonumber(redis.call('hget', key, ARGV[i]))
    if old then x = old + a * (x - old) end
    redis.call('hset', key, ARGV[i], string.format('%.17g', x))
  end
  redis.call('expire', key, ttl)
end
"""

# KEYS[1] snapshot hash, KEYS[2] (optional) speed hash
# ARGV: expected version, new snapshot, key ttl s, channel to announce a stored write on ('' none), the
# message (the subject), then with KEYS[2]: alpha, speed ttl s, (field, sample) pairs
# The measures are folded whatever the write's outcome (the caller passes them with its first write only).
_CAS = (
    _FOLD_SPEED
    + """
if KEYS[2] then fold_speed(KEYS[2], tonumber(ARGV[6]), ARGV[7], 8) end
local v = redis.call('hget', KEYS[1], 'v') or '0'
if v ~= ARGV[1] then
  local t = redis.call('time')
  return {v, redis.call('hget', KEYS[1], 's') or '', t[1], t[2]}
end
redis.call('hset', KEYS[1], 'v', tostring(tonumber(ARGV[1]) + 1), 's', ARGV[2])
redis.call('expire', KEYS[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('publish', ARGV[4], ARGV[5]) end
return 1
"""
)

# KEYS[1] permit   ARGV[1] token: delete only the holder's own permit
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

# KEYS[1] permit   ARGV[1] token, ARGV[2] ttl ms: extend only the holder's own permit
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""

# KEYS[1] ramp key   ARGV[1] µs between calls (1 / rate): `turnout.core.ramp.rate_slot` on Redis's
# clock. Returns 0 (go) or the µs until a call fits; the key lives a second past its arrival time.
_RAMP = """
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('get', KEYS[1]) or '0')
if tat > now then return math.ceil(tat - now) end
local step = tonumber(ARGV[1])
redis.call('set', KEYS[1], string.format('%.0f', now + step), 'px', math.ceil(step / 1000) + 1000)
return 0
"""

# KEYS[1] speed hash   ARGV: alpha, ttl s, then (field, sample) pairs: each field's EWMA
_SPEED = (
    _FOLD_SPEED
    + """
fold_speed(KEYS[1], tonumber(ARGV[1]), ARGV[2], 3)
return 1
"""
)

# KEYS: per target its snapshot hash and its measures hash, then one key per usage cap
# ARGV[1]: the number of targets
# Returns {TIME seconds, TIME micros, then per target v, s, ttft_ms, tps, then per cap its value}.
_LOAD = """
local t = redis.call('time')
local out = {t[1], t[2]}
local n = tonumber(ARGV[1])
for i = 1, n do
  local snap = redis.call('hmget', KEYS[2 * i - 1], 'v', 's')
  local speed = redis.call('hmget', KEYS[2 * i], 'ttft_ms', 'tps')
  out[#out + 1] = snap[1]
  out[#out + 1] = snap[2]
  out[#out + 1] = speed[1]
  out[#out + 1] = speed[2]
end
for i = 2 * n + 1, #KEYS do out[#out + 1] = redis.call('get', KEYS[i]) end
return out
"""

_KEY_TTL_S = 7 * 24 * 3600
"""Snapshots of targets nobody calls for a week are dropped (they read as CLOSED)."""


def _entry(version: bytes | str | None, data: bytes | str | None) -> Versioned:
    if not version or not data:
        return Versioned(0, CLOSED)
    raw = data.encode() if isinstance(data, str) else data
    try:
        return Versioned(int(version), _decode.decode(raw))
    except (ValueError, msgspec.DecodeError):
        return Versioned(int(version), CLOSED)


def _number(value: bytes | str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def _caps(subjects: Sequence[str], replies: Sequence[bytes | str | None]) -> dict[str, float]:
    values = {s: _number(v) for s, v in zip(subjects, replies)}
    return {s: v for s, v in values.items() if v is not None}


def _speed_pairs(ttft_ms: float | None, tokens_per_s: float | None) -> list[str | float]:
    pairs: list[str | float] = []
    for field, sample in (("ttft_ms", ttft_ms), ("tps", tokens_per_s)):
        if sample is not None:
            pairs += [field, repr(float(sample))]
    return pairs


def _clock(seconds: bytes | str | int, micros: bytes | str | int) -> float:
    return int(seconds) + int(micros) / 1_000_000


@maps_state_errors
class RedisBreakerStore:
    """Snapshots shared by every process through Redis (see module doc)."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._cas = redis.register_script(_CAS)
        self._release = redis.register_script(_RELEASE)
        self._renew = redis.register_script(_RENEW)
        self._speed = redis.register_script(_SPEED)
        self._load = redis.register_script(_LOAD)
        self._ramp = redis.register_script(_RAMP)

    async def load(self, targets: Sequence[str], caps: Sequence[str] = ()) -> Loaded:
        """See `BreakerStore.load`: one command (a Lua script: `TIME`, two `HMGET`
        per target: the snapshot and the measures, one `GET` per usage cap)."""
        names: list[str] = []
        for target in targets:
            names += [keys.breaker_key(target), keys.speed_key(target)]
        names += [keys.plan_cap_key(subject) for subject in caps]
        replies = await self._load(keys=names, args=[len(targets)])
        per_target, cap_replies = replies[2 : 2 + 4 * len(targets)], replies[2 + 4 * len(targets) :]
        entries: dict[str, Versioned] = {}
        speeds: dict[str, Speed] = {}
        for i, target in enumerate(targets):
            version, data, ttft, tps = per_target[4 * i : 4 * i + 4]
            entries[target] = _entry(version, data)
            if ttft is not None or tps is not None:
                speeds[target] = Speed(ttft_ms=_number(ttft), tokens_per_s=_number(tps))
        return Loaded(
            now_s=_clock(replies[0], replies[1]),
            entries=entries,
            speeds=speeds,
            caps=_caps(caps, cap_replies),
        )

    async def load_caps(self, subjects: Sequence[str]) -> dict[str, float]:
        """See `BreakerStore.load_caps`: one round trip."""
        if not subjects:
            return {}
        return _caps(subjects, await self._redis.mget([keys.plan_cap_key(s) for s in subjects]))

    async def set_plan_cap(self, subject: str, *, until_s: float, ttl_s: float) -> None:
        """See `BreakerStore.set_plan_cap`: `SET ... PX` and its announcement on
        `keys.HEALTH_CHANNEL`, in one round trip."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(keys.plan_cap_key(subject), repr(float(until_s)), px=max(1, int(ttl_s * 1000)))
            pipe.publish(keys.HEALTH_CHANNEL, subject)
            await pipe.execute()

    async def record_speed(
        self, target: str, *, ttft_ms: float | None, tokens_per_s: float | None, alpha: float, ttl_s: int
    ) -> None:
        """See `BreakerStore.record_speed`: one Lua round trip."""
        pairs = _speed_pairs(ttft_ms, tokens_per_s)
        if pairs:
            await self._speed(keys=[keys.speed_key(target)], args=[repr(float(alpha)), int(ttl_s), *pairs])

    async def compare_and_set(
        self, target: str, version: int, snapshot: BreakerSnapshot, speed: SpeedSamples = None, *, notify: bool = False
    ) -> Loaded | None:
        """See `BreakerStore.compare_and_set`: one Lua round trip, `speed` folded in and the
        announcement published by the same script (several samples: in order, each as its own
        EWMA step; they share the first's weight and TTL, as every sample of one process does)."""
        names = [keys.breaker_key(target)]
        args: list[bytes | str | int | float] = [
            version,
            _encode.encode(snapshot),
            _KEY_TTL_S,
            keys.HEALTH_CHANNEL if notify else "",
            target,
        ]
        folded = samples(speed)
        pairs = [p for sample in folded for p in _speed_pairs(sample.ttft_ms, sample.tokens_per_s)]
        if pairs:
            names.append(keys.speed_key(target))
            args += [repr(float(folded[0].alpha)), int(folded[0].ttl_s), *pairs]
        reply = await self._cas(keys=names, args=args)
        if reply == 1:
            return None
        v, s, sec, usec = reply
        return Loaded(now_s=_clock(sec, usec), entries={target: _entry(v, s)})

    async def acquire_probe(self, target: str, ttl_s: float) -> str | None:
        """See `BreakerStore.acquire_probe`: `SET NX PX` of a random token."""
        token = secrets.token_hex(8)
        taken = await self._redis.set(keys.probe_key(target), token, nx=True, px=max(1, int(ttl_s * 1000)))
        return token if taken else None

    async def release_probe(self, target: str, token: str) -> None:
        """See `BreakerStore.release_probe`: compare-and-delete in Lua."""
        await self._release(keys=[keys.probe_key(target)], args=[token])

    async def renew_probe(self, target: str, token: str, ttl_s: float) -> bool:
        """See `BreakerStore.renew_probe`: compare-and-`PEXPIRE` in Lua."""
        renewed = await self._renew(keys=[keys.probe_key(target)], args=[token, max(1, int(ttl_s * 1000))])
        return bool(renewed)

    async def take_ramp_slot(self, target: str, rate: float) -> float:
        """See `BreakerStore.take_ramp_slot`: one Lua round trip (only while `target` is in slow start)."""
        step_us = max(1, round(1_000_000 / max(rate, 1e-6)))
        wait_us = await self._ramp(keys=[keys.ramp_key(target)], args=[step_us])
        return int(wait_us) / 1_000_000
