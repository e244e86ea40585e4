"""The start-up persistence check of every process that writes jobs (ingress, worker).

Owns: reading Redis's `CONFIG GET appendonly` once at start, deciding what
follows (`decide`, pure), and logging it as one structured line. Without AOF
a Redis restart loses every queued job (their clients get `503 job_lost`),
pending results and the circuit breakers' state, so a process refuses to
start unless the operator allows it: `TURNOUT_ALLOW_NO_AOF=1` (or the
`--allow-no-aof` flag of `turnout ingress` / `turnout worker`). Where
`CONFIG` is disabled or renamed (managed Redis) persistence cannot be seen:
the process warns and starts. A Redis unreachable at start is checked once
it answers (`require_persistence_when_reachable`, run by the ingress and the
worker beside their own wait for Redis): without AOF, and not allowed, the
process then stops with the same error and exit code as at start.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
import redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from turnout.errors import ConfigError
from turnout.state.clients import blocking_client
from turnout.state.switches import switch_on

log = logging.getLogger("turnout.persistence")

ALLOW_ENV = "TURNOUT_ALLOW_NO_AOF"
"""Environment variable: `1` (or `true`, `yes`) lets a process start on a Redis without AOF."""

CONSEQUENCE = "queued jobs, pending results and circuit-breaker state are lost when Redis restarts"

CHECK_TIMEOUT_S = 3.0
"""Longest the check waits for Redis (seconds)."""


class Persistence(enum.StrEnum):
    """What `CONFIG GET appendonly` told."""

    AOF = "aof"  # appendonly yes
    OFF = "off"  # appendonly no
    UNKNOWN = "unknown"  # CONFIG refused (disabled, renamed, no permission)
    UNREACHABLE = "unreachable"  # no answer at all


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What a starting process does about persistence.

    Attributes:
        start: False: refuse to start (exit non-zero).
        checked: False when Redis did not answer (persistence still to check once it does).
        level: the log level of `message` (`logging.INFO`, `WARNING`, `ERROR`), or None: say nothing.
        message: one line naming the consequence and the way out.
    """

    start: bool
    level: int | None
    message: str
    checked: bool = True


class PersistenceRefused(Exception):
    """Raised by `require_persistence` when Redis runs without AOF and that is not allowed."""


def decide(persistence: Persistence, *, allowed: bool, service: str) -> Decision:
    """The decision for `persistence` (pure).

    Args:
        persistence: what the check found.
        allowed: the operator allows a Redis without AOF (`TURNOUT_ALLOW_NO_AOF`).
        service: the process's name for the message (`turnout ingress`).
    """
    if persistence is Persistence.AOF:
        return Decision(start=True, level=None, message="")
    if persistence is Persistence.OFF:
        if allowed:
            return Decision(
                start=True,
                level=logging.WARNING,
                message=(
                    f"{service}: Redis runs without AOF persistence (appendonly no): {CONSEQUENCE}. "
                    f"Starting anyway: {ALLOW_ENV} is set."
                ),
            )
        return Decision(
            start=False,
            level=logging.ERROR,
            message=(
                f"{service}: refusing to start: Redis runs without AOF persistence (appendonly no): {CONSEQUENCE}. "
                f"Turn AOF on (redis-server --appendonly yes, or CONFIG SET appendonly yes), or allow it "
                f"explicitly with {ALLOW_ENV}=1 (or --allow-no-aof)."
            ),
        )
    if persistence is Persistence.UNKNOWN:
        return Decision(
            start=True,
            level=logging.WARNING,
            message=(
                f"{service}: Redis persistence could not be checked (CONFIG GET appendonly refused: disabled or "
                f"renamed, as on managed Redis); make sure it persists (AOF), else {CONSEQUENCE}."
            ),
        )
    return Decision(
        start=True,
        level=logging.WARNING,
        message=f"{service}: Redis unreachable at start; its persistence (AOF) will be checked once it answers.",
        checked=False,
    )


class DatabaseOutOfRange(ConfigError):
    """The Redis URL names a database the server does not have (`SELECT` refused: `DB index is out of range`).

    A `ConfigError`: the process stops with one line (exit 2) instead of starting and reconnecting forever.
    """


def read_persistence(client: redis.Redis) -> Persistence:
    """`CONFIG GET appendonly` through `client` (synchronous, its own timeouts).

    Raises:
        DatabaseOutOfRange: the server refused the URL's database when the connection selected it.
    """
    try:
        answer: Any = client.config_get("appendonly")
    except (RedisConnectionError, RedisTimeoutError, TimeoutError, OSError):
        return Persistence.UNREACHABLE
    except ResponseError as exc:
        if "DB index is out of range" in str(exc):
            database = client.connection_pool.connection_kwargs.get("db", 0)
            raise DatabaseOutOfRange(
                f"the Redis URL's database {database} is out of range for this Redis (it answered: {exc}); "
                "a Redis has databases 0 to its `databases` setting minus 1 (16 by default)"
            ) from None
        return Persistence.UNKNOWN  # unknown command (renamed / disabled) or NOPERM
    except RedisError:
        return Persistence.UNKNOWN
    return persistence_of(answer)


def persistence_of(answer: Any) -> Persistence:
    """What a `CONFIG GET appendonly` answer (a mapping of bytes or str) says."""
    values = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in dict(answer).items()}
    value = values.get("appendonly")
    if value is None:
        return Persistence.UNKNOWN
    text = value.decode() if isinstance(value, bytes) else str(value)
    return Persistence.AOF if text.strip().lower() == "yes" else Persistence.OFF


async def warn_unless_persistent(client: AsyncRedis) -> Persistence:
    """Check persistence again on a Redis that came back without its data (`turnout.state.epoch`):
    a warning naming the missing AOF when it is off (the process keeps serving: it was allowed to
    start, or Redis lost AOF under it), and what was found. Never raises."""
    try:
        found = persistence_of(await client.config_get("appendonly"))
    except (RedisError, OSError):
        found = Persistence.UNKNOWN
    if found is Persistence.OFF:
        log.warning(
            "persistence: Redis came back without its data and runs without AOF (appendonly no): %s", CONSEQUENCE
        )
    return found


def allowed_by(env: Mapping[str, str]) -> bool:
    """True when `env` turns `TURNOUT_ALLOW_NO_AOF` on (1, true, yes, on: `turnout.state.switches`).

    Raises:
        ValueError: a value that is neither on nor off (the variable named).
    """
    return switch_on(env, ALLOW_ENV)


def require_persistence(
    redis_url: str,
    *,
    service: str,
    allow: bool = False,
    env: Mapping[str, str] | None = None,
    quiet_unreachable: bool = False,
) -> Decision:
    """Check `redis_url` once at start; log the decision as one structured line.

    Args:
        redis_url: the process's Redis.
        service: its name in the message (`turnout ingress`, `turnout worker`).
        allow: the `--allow-no-aof` flag; `TURNOUT_ALLOW_NO_AOF` in `env`
            (default `os.environ`) allows too.
        quiet_unreachable: log nothing when Redis does not answer (a repeated check).

    Returns:
        The decision (to start).

    Raises:
        PersistenceRefused: AOF is off and not allowed (the message says why and how to allow).
        DatabaseOutOfRange: the URL's database does not exist on this Redis.
    """
    allowed = allow or allowed_by(os.environ if env is None else env)
    with blocking_client(
        redis_url,
        socket_connect_timeout=CHECK_TIMEOUT_S,
        socket_timeout=CHECK_TIMEOUT_S,
    ) as client:
        persistence = read_persistence(client)
    decision = decide(persistence, allowed=allowed, service=service)
    if decision.level is not None and not (quiet_unreachable and not decision.checked):
        log.log(
            decision.level,
            decision.message,
            extra={
                "event": "redis_persistence",
                "persistence": str(persistence),
                "allowed": allowed,
                "refused": not decision.start,
            },
        )
    if not decision.start:
        raise PersistenceRefused(decision.message)
    return decision


async def require_persistence_when_reachable(
    check: Callable[[], Decision],
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    interval_s: float = 1.0,
) -> Decision:
    """Repeat the start-up check until Redis answers it; its decision (logged as at start).

    For a process whose start-up check found Redis unreachable (`Decision.checked`
    False): it starts, and this runs beside it, in a thread per try (`check`
    is `require_persistence` with `quiet_unreachable=True`, bound to the
    process's Redis and service).

    Args:
        check: one synchronous check.
        sleep: awaited between tries (seconds); tests pass a fake clock's.
        interval_s: seconds between tries.

    Raises:
        PersistenceRefused: Redis answered, without AOF, and that is not allowed:
            the process stops as it would have at start.
    """
    while True:
        decision = await asyncio.to_thread(check)
        if decision.checked:
            return decision
        await sleep(interval_s)
