"""Socket-level faults on an aiohttp request's raw transport.

Owns: resetting (TCP RST), closing (FIN) and waiting on a client connection
(noticing promptly when the client leaves), for any provider's wire module.
Must not import: provider wire modules. Only this module touches sockets.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from aiohttp import web

POLL_S = 0.02
"""How often `wait_for_disconnect` looks at the connection, in seconds."""


def is_gone(request: web.BaseRequest) -> bool:
    """True once the client's connection is closed or closing."""
    transport = request.transport
    return transport is None or transport.is_closing()


def reset(request: web.BaseRequest) -> None:
    """Abort the connection with a TCP RST (SO_LINGER on, timeout 0).

    Nothing buffered is sent; the client sees `ECONNRESET` on its next read.
    """
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass  # already dead: aborting is all that is left
    transport.abort()


def close(request: web.BaseRequest) -> None:
    """Close the connection cleanly (FIN) after flushing what was written."""
    transport = request.transport
    if transport is not None:
        transport.close()


async def pause(request: web.BaseRequest, seconds: float) -> bool:
    """Sleep `seconds`, waking early if the client leaves.

    The connection is looked at every `POLL_S`, so a client that leaves is
    noticed within `min(seconds, POLL_S)` plus scheduling delay.

    Args:
        request: the request whose connection is watched.
        seconds: how long to sleep (s); 0 or less only checks the connection.

    Returns:
        True if the client is still connected afterwards, False if it left.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not is_gone(request):
        left = deadline - loop.time()
        if left <= 0:
            return True
        await asyncio.sleep(min(POLL_S, left))
    return False


async def wait_for_disconnect(request: web.BaseRequest, stopping: asyncio.Event) -> bool:
    """Wait until the client leaves or the server stops; then close.

    Args:
        request: the request whose connection is held open.
        stopping: set when the server shuts down, so held connections do not
            delay shutdown.

    Returns:
        True if the client left, False if the server closed the connection
        because it is stopping.
    """
    while not is_gone(request) and not stopping.is_set():
        try:
            await asyncio.wait_for(stopping.wait(), timeout=POLL_S)
        except TimeoutError:
            continue
    client_left = is_gone(request)
    close(request)
    return client_left
