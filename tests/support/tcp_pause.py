"""A TCP proxy on 127.0.0.1 that a test can cut: a network link lost without killing either end.

Owns: forwarding bytes between clients and one target (a Redis) on a thread of its own. `cut`
resets every connection through it and refuses new ones (accepted, then closed at once), as a
network blip does to one process: its client sees `ConnectionError`s while every other process
still reaches the target; `restore` forwards again. Unlike a SIGSTOP of Redis, which stalls
every client, only the processes behind the proxy lose the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from support.procs import free_port

CHUNK = 65536
"""Bytes one read forwards at most."""


class PausableProxy:
    """Forwards 127.0.0.1:`port` to `target_port` on 127.0.0.1 until `stop` (a thread and loop of its own).

    Args:
        target_port: the port forwarded to.

    Attributes:
        port: the proxy's own port.
    """

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target_port = target_port
        self._loop = asyncio.new_event_loop()
        self._open = asyncio.Event()
        self._links: set[asyncio.StreamWriter] = set()
        self._server: asyncio.base_events.Server | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True, name="pausable-proxy")
        self._thread.start()
        if not ready.wait(5):
            raise TimeoutError("the proxy did not start within 5 s")

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._open.set()
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._open.is_set():  # cut: refused
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        except OSError:
            writer.transport.abort()
            return
        self._links.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)
        self._links.difference_update((writer, up_writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()

    def _cut(self) -> None:
        self._open.clear()
        for writer in list(self._links):
            writer.transport.abort()

    def cut(self) -> None:
        """Lose the link: every connection reset, new ones refused until `restore`."""
        self._loop.call_soon_threadsafe(self._cut)

    def restore(self) -> None:
        """Forward again."""
        self._loop.call_soon_threadsafe(self._open.set)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._cut()
        await asyncio.sleep(0.2)  # the accepts and resets in flight finish
        for writer in list(self._links):
            writer.close()

    def stop(self) -> None:
        """Stop forwarding and the thread (bounded: 5 s)."""
        done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            done.result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
