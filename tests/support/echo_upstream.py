"""A hostile OpenAI-compatible upstream for leak tests: it quotes the key it was sent everywhere.

Owns: one ASGI app, served in a thread of the test process, that answers
`POST /v1/chat/completions` by the requested model's name:

- `leak-401`: 401 whose message, `type`, `param` and `code` quote the key
  and an internal address;
- `leak-prefix`: 500 quoting only the key's first 24 characters;
- `leak-html`: 502 HTML page with the key and an address in it;
- `leak-envelope`: 200 carrying an error envelope with the key in `code`;
- `leak-ok`: a normal answer (JSON, or SSE when `stream` is set);
- `leak-midstream` (stream): one content chunk, then an error event quoting
  the key and an address, and no `[DONE]`.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import uvicorn

from support.procs import free_port

INTERNAL = "10.20.30.40:8443"


def _key(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return str(value.decode("latin-1")).removeprefix("Bearer ").strip()
    return ""


def _chunk(content: str) -> bytes:
    data = {
        "id": "chatcmpl-leak",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "leak",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _answer(model: str, key: str, stream: bool) -> tuple[int, str, list[bytes]]:
    quoted = f"Incorrect API key provided: {key}. Upstream {INTERNAL} refused."
    body: dict[str, Any]
    if model == "leak-401":
        body = {
            "error": {
                "message": quoted,
                "type": f"invalid_request_error:{key}",
                "param": key,
                "code": f"invalid_api_key:{key}",
            }
        }
        return 401, "application/json", [json.dumps(body).encode()]
    if model == "leak-prefix":
        body = {"error": {"message": f"key {key[:24]} is not active", "type": "server_error", "code": None}}
        return 500, "application/json", [json.dumps(body).encode()]
    if model == "leak-html":
        page = f"<html><head><title>502</title></head><body>bad gateway {INTERNAL} key={key}</body></html>"
        return 502, "text/html", [page.encode()]
    if model == "leak-envelope":
        body = {"error": {"message": quoted, "type": "server_error", "code": f"overloaded:{key}"}}
        return 200, "application/json", [json.dumps(body).encode()]
    if model == "leak-midstream" and stream:
        error = {"error": {"message": f"{quoted} (mid-stream)", "type": "server_error", "code": f"x:{key}"}}
        return 200, "text/event-stream", [_chunk("Hello"), b"data: " + json.dumps(error).encode() + b"\n\n"]
    if stream:
        return 200, "text/event-stream", [_chunk("Hello"), b"data: [DONE]\n\n"]
    body = {
        "id": "chatcmpl-ok",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return 200, "application/json", [json.dumps(body).encode()]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI app (see module doc)."""
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        request = json.loads(raw or b"{}")
    except ValueError:
        request = {}
    status, content_type, parts = _answer(str(request.get("model", "")), _key(scope), bool(request.get("stream")))
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type.encode())]})
    for part in parts:
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class EchoUpstream:
    """The app served on 127.0.0.1 in a daemon thread; `url` is its base URL (`…/v1` is the API root)."""

    def __init__(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop serving."""
        self._server.should_exit = True
        self._thread.join(timeout=5)
