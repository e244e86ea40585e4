"""A recording pass-through in front of the ingress: what a real client sent, byte for byte.

Owns: one ASGI app, served on 127.0.0.1 in a daemon thread of the test process, that forwards
every request to one target (the ingress) as it came and relays the answer as it comes
(streams chunk by chunk), recording each exchange: the method, path, request headers and
body bytes the client sent, and the status and headers it got back (`x-turnout-*`).

A client that is not ours to instrument (Claude Code, the Codex CLI) is pointed at it
instead of the ingress, so a test can compare what the client sent with what each upstream
received (the simulator's `/sim/log`) and read which provider served each call.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from support.procs import free_port

HOP_BY_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})
"""Headers that belong to one connection, not to the request: not forwarded either way."""


@dataclass
class Exchange:
    """One request the client sent and the answer's head.

    Attributes:
        method: the request's method.
        path: its path and query.
        headers: its headers, names lower-cased.
        body: its body as sent.
        status: the answer's status (0 until it came).
        response_headers: the answer's headers, names lower-cased.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)


class RecordingProxy:
    """Forwards to `target` (a base URL) and records every `Exchange`; `url` is its own base URL."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.exchanges: list[Exchange] = []
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self._app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                access_log=False,
                ws="none",
                interface="asgi3",
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self._server.started:
            raise TimeoutError("the recording proxy did not start within 10 s")

    def calls(self, path: str) -> list[Exchange]:
        """The exchanges whose path (query left off) is `path`, in order."""
        return [e for e in self.exchanges if e.path.split("?", 1)[0] == path]

    def stop(self) -> None:
        """Stop serving."""
        self._server.should_exit = True
        self._thread.join(timeout=5)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The ASGI app: record, forward, relay."""
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope.get("query_string", b"").decode("latin-1")
        path = scope["path"] + (f"?{query}" if query else "")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        exchange = Exchange(method=scope["method"], path=path, headers=headers, body=body)
        self.exchanges.append(exchange)
        forwarded = {k: v for k, v in headers.items() if k not in HOP_BY_HOP}
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as client:
            request = client.build_request(scope["method"], self.target + path, headers=forwarded, content=body)
            response = await client.send(request, stream=True)
            try:
                exchange.status = response.status_code
                exchange.response_headers = {k.lower(): v for k, v in response.headers.items()}
                relayed = [
                    (k.encode("latin-1"), v.encode("latin-1"))
                    for k, v in response.headers.multi_items()
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-encoding"
                ]
                await send({"type": "http.response.start", "status": response.status_code, "headers": relayed})
                async for chunk in response.aiter_bytes():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                await response.aclose()
