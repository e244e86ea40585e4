"""An OpenAI-compatible chat upstream that records every request body it receives.

Owns: one ASGI app, served in a thread of the test process, answering
`POST /v1/chat/completions` with `seen <n> messages` (n: the request's `messages`
count), as JSON or as an SSE stream (`stream: true`, one content chunk then the usage
chunk and `[DONE]`), and keeping each decoded request body by its `model` so a test
reads exactly what an upstream received (`received`), and each request's `openai-beta`
header (`beta_headers`).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import uvicorn

from support.procs import free_port


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-rec",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
    }


def _frames(model: str, text: str) -> list[bytes]:
    base = {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 0, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}},
    ]
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


class RecordingUpstream:
    """The app served on 127.0.0.1 in a daemon thread; `url` is its base URL (`…/v1` is the API root)."""

    def __init__(self) -> None:
        self._bodies: list[dict[str, Any]] = []
        self._betas: list[tuple[str, str | None]] = []  # (model, the request's `openai-beta` or None)
        self._lock = threading.Lock()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self._app, host="127.0.0.1", port=port, log_level="warning", access_log=False, interface="asgi3"
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def received(self, model: str) -> list[dict[str, Any]]:
        """Every request body received for upstream `model`, oldest first."""
        with self._lock:
            return [b for b in self._bodies if b.get("model") == model]

    def beta_headers(self, model: str) -> list[str | None]:
        """The `openai-beta` header of every request received for upstream `model` (None: not sent), oldest first."""
        with self._lock:
            return [beta for m, beta in self._betas if m == model]

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw or b"{}")
        model = str(body.get("model", ""))
        beta = dict(scope["headers"]).get(b"openai-beta")
        with self._lock:
            self._bodies.append(body)
            self._betas.append((model, beta.decode() if beta is not None else None))
        text = f"seen {len(body.get('messages') or [])} messages"
        stream = bool(body.get("stream"))
        parts = _frames(model, text) if stream else [json.dumps(_completion(model, text)).encode()]
        kind = b"text/event-stream" if stream else b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        for part in parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def stop(self) -> None:
        """Stop serving."""
        self._server.should_exit = True
        self._thread.join(timeout=5)
