"""A Redis connection pool whose check of a pooled connection does not wait a turn of the event loop.

Owns: `BufferCheckedPool`, the pool every
long-lived Turnout client (the ingress's, the worker's) takes its
connections from, and `BufferCheckedSentinelPool`, the same check on
redis-py's Sentinel-managed pool (a `redis+sentinel://` URL:
`turnout.state.clients`).

Why: redis-py 5.x (`redis.asyncio.ConnectionPool.ensure_connection`) checks
each connection it hands out with a read under a zero timeout. That read
always suspends the task for one turn of the event loop, and the timeout
then cancels it, so every command paid an extra wake-up behind whatever
else was ready. Counted with `strace -c` over 300 sequential requests
(bench/README.md "The pool check"): 27.3 turns of the loop per request in
the worker and 14.7 in the ingress with the library's check, 21.1 and 13.0
with this one.

What it checks instead, without waiting: what the event loop has already
received on the connection. A connection is handed out at once when it is
connected, its stream has neither bytes nor end-of-file nor an error
waiting, and its reply parser holds no bytes. Anything else, or a parser
this module does not know, goes through the library's own check, which
reconnects a connection the server closed (a Redis restart, a killed
client) and refuses one with a reply nobody read. The one case the
library's check catches and this one does not is bytes or an end-of-file
that reach the socket in the same turn as the checkout; the command then
fails as it would on a connection lost just after any check.

A connection never goes back to the pool with a reply unread: redis-py
5.x closes it when a send or a read is interrupted, cancellation
included (`AbstractConnection.send_packed_command`, `read_response`).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection, Connection
from redis.asyncio.sentinel import SentinelConnectionPool, SentinelManagedConnection, SentinelManagedSSLConnection

from turnout.state.packing import hiredis_packing


def received_nothing(connection: AbstractConnection) -> bool:
    """True when `connection` is connected and nothing has arrived on it since its last reply.

    Reads only what the event loop has already buffered (the asyncio stream
    and the hiredis reader); never waits. False, to be checked the library's
    way, for a connection not connected, with bytes, end-of-file or an error
    waiting, or with a parser other than hiredis.
    """
    stream = getattr(connection, "_reader", None)
    if stream is None or getattr(connection, "_writer", None) is None:
        return False
    parser = getattr(getattr(connection, "_parser", None), "_reader", None)
    has_data = getattr(parser, "has_data", None)
    if has_data is None:
        return False
    waiting = getattr(stream, "_buffer", None)
    if waiting is None or waiting:
        return False
    return not stream.at_eof() and stream.exception() is None and not has_data()


class _BufferCheck(ConnectionPool):
    """The check of a pooled connection by what was received (module doc), for any pool class."""

    async def ensure_connection(self, connection: AbstractConnection) -> None:
        """Hand out `connection` as is when `received_nothing`, else check it the library's way.

        Raises:
            redis.exceptions.ConnectionError: as the library's check does (a
                connection that still has data after reconnecting).
        """
        if received_nothing(connection):
            return
        await super().ensure_connection(connection)


class BufferCheckedPool(_BufferCheck):
    """`redis.asyncio.ConnectionPool` that hands out a connection with nothing received at once (module doc).

    Its connections pack their commands with hiredis (`turnout.state.packing`).
    Same constructor and behaviour as the library's pool otherwise.
    """

    def __init__(
        self, connection_class: type[AbstractConnection] = Connection, max_connections: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(connection_class=hiredis_packing(connection_class), max_connections=max_connections, **kwargs)


class BufferCheckedSentinelPool(_BufferCheck, SentinelConnectionPool):
    """redis-py's `SentinelConnectionPool` (the primary's address asked of the sentinels at each
    new connection) with the check of `BufferCheckedPool` and hiredis packing.

    Same constructor as the library's pool (`service_name, sentinel_manager, **kwargs`; made by
    `Sentinel.master_for(..., connection_pool_class=BufferCheckedSentinelPool)`). A connection
    the old primary closed fails the check and reconnects to the address the sentinels give now.
    """

    def __init__(self, service_name: str, sentinel_manager: Any, **kwargs: Any) -> None:
        managed = SentinelManagedSSLConnection if kwargs.pop("ssl", False) else SentinelManagedConnection
        kwargs["connection_class"] = hiredis_packing(kwargs.get("connection_class", managed))
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]
