"""Questions about the Redis server itself: does it answer, how deep is the queue.

Owns: the readiness ping of a process, the queue depth gauge, and the
command-line ping of `turnout dev` (a blocking client: it runs before any
event loop); the persistence check is `turnout.state.persistence`. None
raises: an unreachable Redis is an answer here.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.clients import blocking_client
from turnout.state.errors import STATE_ERRORS


async def answers(client: Redis, timeout_s: float) -> bool:
    """True when Redis answers PING within `timeout_s` seconds."""
    try:
        await asyncio.wait_for(client.ping(), timeout_s)
    except STATE_ERRORS:  # builtin TimeoutError is an OSError
        return False
    return True


async def queue_depth(client: Redis) -> int | None:
    """Jobs in arq's queue (queued + running), or None when Redis is unreachable."""
    try:
        return int(await client.zcard(keys.QUEUE))
    except STATE_ERRORS:
        return None


def answers_now(url: str, connect_timeout_s: float) -> bool:
    """True when Redis at `url` answers PING (blocking; a refused connect waits at most `connect_timeout_s`)."""
    try:
        with blocking_client(url, socket_connect_timeout=connect_timeout_s) as client:
            return bool(client.ping())
    except STATE_ERRORS:
        return False
