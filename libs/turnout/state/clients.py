"""The one place a Turnout process builds a Redis client from its URL.

Owns: `async_client` (the asyncio clients of the ingress, the worker and the
CLI) and `blocking_client` (the start-up checks that run before any event
loop), for every form `turnout.state.redis_url` accepts.

Why one factory: a `redis+sentinel://` URL (`turnout.state.sentinel_url`)
is not a URL redis-py's `from_url` reads; it names sentinels to ask for the
primary's address. Every place that opens Redis goes through here, so every
process follows a failover the same way: redis-py's `Sentinel.master_for`
pool asks the sentinels for the primary at each new connection, and a
connection error or a `READONLY` reply (the old primary demoted) drops the
connection, so the next command reconnects to the address the sentinels give
then. The error itself reaches the caller (`StateUnavailable`: 503 with
Retry-After on the request path); nothing here retries or waits.

Timeouts: the options given (`socket_connect_timeout`, `socket_timeout`, in
seconds) apply to the primary's connections; the sentinels' connections take
`SENTINEL_TIMEOUT_S` for both unless the options are shorter, so a sentinel
that does not answer costs a bounded time, even for a client without a read
timeout (the pub/sub listener's).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast, overload

import redis
import redis.sentinel
from redis.asyncio import Redis
from redis.asyncio.sentinel import Sentinel

from turnout.state.pool import BufferCheckedPool, BufferCheckedSentinelPool
from turnout.state.sentinel_url import SentinelAddress, is_sentinel_url, parse_sentinel_url

SENTINEL_TIMEOUT_S = 0.5
"""Longest a sentinel's connect or reply may take (seconds) when the client's options set no shorter one."""

R = TypeVar("R", bound=Redis)


@overload
def async_client(url: str, *, redis_class: type[R], **options: Any) -> R: ...


@overload
def async_client(url: str, **options: Any) -> Redis: ...


def async_client(url: str, *, redis_class: type[Redis] = Redis, **options: Any) -> Redis:
    """An asyncio client of `redis_class` for `url`, on a `BufferCheckedPool` (or, for a
    `redis+sentinel://` URL, a `BufferCheckedSentinelPool` following the primary).

    Args:
        url: a URL `turnout.state.redis_url.redis_url_fault` accepts (check it first).
        redis_class: `redis.asyncio.Redis` or a subclass (arq's `ArqRedis` for the worker).
        options: connection keyword arguments (`socket_connect_timeout`, `socket_timeout`,
            `health_check_interval`, ...), as redis-py's `from_url` takes them.

    Raises:
        ValueError: a URL neither redis-py nor `parse_sentinel_url` reads (the clause says why).
        Never contacts Redis: the first command connects.
    """
    if not is_sentinel_url(url):
        return redis_class.from_pool(BufferCheckedPool.from_url(url, **options))
    address = parse_sentinel_url(url)
    sentinel = Sentinel(address.sentinels, sentinel_kwargs=_sentinel_options(address, options))  # type: ignore[no-untyped-call]
    return sentinel.master_for(  # type: ignore[no-any-return]
        address.service,
        redis_class=redis_class,
        connection_pool_class=BufferCheckedSentinelPool,
        **_primary_options(address, options),
    )


def blocking_client(url: str, **options: Any) -> redis.Redis:
    """A blocking client for `url` (any accepted form; `async_client`'s arguments), for checks
    made before an event loop runs.

    Raises:
        ValueError: as `async_client`.
    """
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    address = parse_sentinel_url(url)
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        address.sentinels, sentinel_kwargs=_sentinel_options(address, options)
    )
    primary = sentinel.master_for(address.service, **_primary_options(address, options))  # type: ignore[no-untyped-call]
    return cast(redis.Redis, primary)


def _primary_options(address: SentinelAddress, options: dict[str, Any]) -> dict[str, Any]:
    """The primary's connection options: the URL's database, credentials and TLS, then `options`."""
    found: dict[str, Any] = {"db": address.db, "username": address.username, "password": address.password}
    if address.ssl:
        found["ssl"] = True
    return {**found, **options}


def _sentinel_options(address: SentinelAddress, options: dict[str, Any]) -> dict[str, Any]:
    """The sentinels' connection options: their credentials and TLS, bounded timeouts (module doc)."""
    found: dict[str, Any] = {
        "username": address.sentinel_username,
        "password": address.sentinel_password,
        "socket_connect_timeout": _at_most(options.get("socket_connect_timeout")),
        "socket_timeout": _at_most(options.get("socket_timeout")),
    }
    if address.ssl:
        found["ssl"] = True
    return found


def _at_most(seconds: float | None) -> float:
    return SENTINEL_TIMEOUT_S if seconds is None else min(seconds, SENTINEL_TIMEOUT_S)
