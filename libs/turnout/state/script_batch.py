"""One Lua script run for many callers of a process, a Redis round trip per batch.

Owns: `ScriptBatch`, a group commit of script calls: a call made while no batch is in
flight is sent at once (alone: no added latency at one request at a time); calls made
while one is in flight wait for it and then go together, in one pipeline of `EVALSHA`s.
Each call still is its own script run (its own atomic step, its own reply or error); only
the round trip is shared. Redis spends most of a small script's cost on the round trip
around it (measured: an `EVALSHA` of `return 1` sent alone cost Redis 16.7 µs of CPU,
1.2 µs in a pipeline of 100; bench/README.md "Round trips shared"), and so does the
sending process (a socket write and a read per round trip).
Must not import: services, FastAPI, httpx, arq.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

_Call = tuple[Sequence[str], Sequence[Any], "asyncio.Future[Any]"]
"""One call waiting for the next round trip: the script's keys and arguments, and its caller's future."""


def _retrieved(done: asyncio.Future[Any]) -> None:
    """Mark a failed call's exception as seen (its caller may have stopped waiting)."""
    if not done.cancelled():
        done.exception()


class ScriptBatch:
    """Runs `script` for every caller of one process, calls made meanwhile sharing a round trip.

    Args:
        redis: the process's client (the pipeline's connection comes from its pool).
        script: the registered script (`Redis.register_script`).
        name: the name of the task that sends the batches (for task dumps).
        send_abandoned: whether a call whose caller stopped waiting (cancelled) before its
            batch left is still sent. True: the call's effect must happen once asked (an
            answer's delivery). False: it must not happen unless its caller still waits (an
            enqueue, whose caller withdraws the job when it stops waiting: a job sent after
            that withdrawal would run for nobody).

    A call whose batch was sent and whose caller stopped waiting ran or not as Redis received
    it, as a lone call cut by a timeout would have.
    """

    def __init__(self, redis: Redis, script: AsyncScript, *, name: str, send_abandoned: bool) -> None:
        self._redis = redis
        self._script = script
        self._name = name
        self._send_abandoned = send_abandoned
        self._calls: list[_Call] = []
        self._sending: asyncio.Task[None] | None = None

    async def __call__(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script on `keys` and `args`; its reply.

        Raises:
            Whatever redis-py raises for this call (a `RedisError`, a connection error):
            callers map it (`turnout.state.errors`).
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        done.add_done_callback(_retrieved)
        self._calls.append((keys, args, done))
        if self._sending is None or self._sending.done() or self._sending.get_loop() is not loop:
            self._sending = loop.create_task(self._send_all(), name=self._name)
        return await done  # not shielded: a caller cancelled cancels only its wait

    async def _send_all(self) -> None:
        """Send what waits, a round trip per batch, until nothing does."""
        while self._calls:
            batch, self._calls = self._calls, []
            if not self._send_abandoned:
                batch = [call for call in batch if not call[2].done()]
            if not batch:
                continue
            try:
                replies = await self._send(batch)
            except Exception as exc:  # noqa: BLE001 - handed to each caller, which raises it
                replies = [exc] * len(batch)
            for (_, _, done), reply in zip(batch, replies, strict=True):
                if done.done():
                    continue
                if isinstance(reply, Exception):
                    done.set_exception(reply)
                else:
                    done.set_result(reply)

    async def _send(self, batch: list[_Call]) -> list[Any]:
        """The replies of `batch` (an exception in place of a call's reply that failed): one call alone,
        several in one pipeline of `EVALSHA`s; a script Redis does not hold (it restarted) is run again
        one call at a time, which loads it."""
        if len(batch) == 1:
            keys, args, _ = batch[0]
            return [await self._script(keys=keys, args=args)]
        sha = self._script.sha
        async with self._redis.pipeline(transaction=False) as pipe:
            for keys, args, _ in batch:
                pipe.evalsha(sha, len(keys), *keys, *args)
            replies = list(await pipe.execute(raise_on_error=False))
        for i, ((keys, args, _), reply) in enumerate(zip(batch, replies, strict=True)):
            if isinstance(reply, NoScriptError):
                try:
                    replies[i] = await self._script(keys=keys, args=args)
                except Exception as exc:  # noqa: BLE001 - this call's own failure
                    replies[i] = exc
        return replies
