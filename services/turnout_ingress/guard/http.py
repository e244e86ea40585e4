"""HTTP/1.1 hardening of the ingress: header size, header and body deadlines, a connection cap,
no keep-alive past an unread body.

Owns: `guarded_protocol`, uvicorn's httptools protocol with four guards
uvicorn does not have (its own limits: `--limit-concurrency` answers 503
only once a request's headers are complete, and `--timeout-keep-alive`
only runs between requests, so a client that never finishes its headers is
held forever and its headers are buffered without bound), and one rule:

- **header size**: a request's head (request line and headers) larger than
  `max_header_bytes` → `431 Request Header Fields Too Large`, connection
  closed, the app never called (RFC 6585 §5); `414 URI Too Long` instead
  when the request line's target is the larger part of that head (a long
  URL, not many headers: RFC 9112 §3). An incomplete head is checked after
  every read, so at most one read (≤ 256 KiB) is buffered past the limit.
- **header deadline**: a head not complete `header_timeout_s` after the
  connection opened (first request) or after its first byte (later
  requests on a keep-alive connection) → `408 Request Timeout`, closed
  (RFC 9110 §15.5.9). A total deadline, not an idle one: a client trickling
  one byte at a time (slow loris) is cut all the same.
- **body deadline**: a body not fully received `body_timeout_s` after its
  head → 408 (or just closed when the answer has started); the app sees
  the client leave.
- **connection cap**: a connection beyond `max_connections` open at once is
  answered `503` and closed at once, before anything is read.
- **no keep-alive past an unread body**: an answer that starts before the
  request's body has all arrived (a `413` for a declared `Content-Length`
  over `max_body_bytes`, a `401` sent before the body is read) carries
  `connection: close`, and the connection is closed once it is sent: a server
  reads the whole body or closes after its answer (RFC 9112 §9.3), and says
  so when it closes (§9.6). uvicorn kept such a connection open, taking
  whatever the client sent next for the rest of the body until the body
  deadline. A body that has all arrived, read or not, keeps the connection.

Each refusal, and the `400` for bytes that are not HTTP/1.1 at all (uvicorn's
own is plain text), is an OpenAI-format error body with a minted
`x-request-id`, like every answer of the app.

Why a protocol subclass: measured in `bench/ingress_hardening.py` against
uvicorn with h11 (`h11_max_incomplete_event_size` gives a 400, still no
header deadline) and `--limit-concurrency`; see README "Ingress hardening".
Must not import: `turnout_ingress.app`.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, ClassVar

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from turnout.config import GatewayConfig
from turnout_ingress.surfaces.messages.wire import error_body as anthropic_error_body
from turnout_ingress.surfaces.messages.wire import on_anthropic_surface

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}
_CODES = {
    400: "invalid_http",
    408: "request_timeout",
    414: "uri_too_long",
    431: "headers_too_large",
    503: "too_many_connections",
}


class GuardLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The guards' settings (`gateway:` in the configuration file).

    Attributes:
        max_header_bytes: bytes of a request's head (request line + headers).
        header_timeout_s: seconds to receive a whole head.
        body_timeout_s: seconds to receive a whole body, from the end of its head.
        max_connections: connections open at once (keep it below the process's
            file descriptor limit, `ulimit -n`).
    """

    max_header_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int

    @classmethod
    def of(cls, gateway: GatewayConfig) -> GuardLimits:
        """The limits set in `gateway:`."""
        return cls(
            max_header_bytes=gateway.max_header_bytes,
            header_timeout_s=gateway.header_timeout_s,
            body_timeout_s=gateway.body_timeout_s,
            max_connections=gateway.max_connections,
        )


def refusal(status: int, message: str, request_id: str, *, anthropic: bool = False) -> bytes:
    """A complete HTTP/1.1 answer with `connection: close`, an `x-request-id` and a JSON error body:
    OpenAI's format, or Anthropic's when `anthropic` (the request line named a `/v1/messages` path).

    `status` is one of 400 (not HTTP/1.1 at all), 408, 414, 431 or 503 (with
    `Retry-After: 1`, as every 503 of the gateway); `request_id` is minted by
    the caller (the request's own header was never read, or not whole).
    """
    body = (
        anthropic_error_body(status, message, request_id)
        if anthropic
        else msgspec.json.encode(
            {
                "error": {
                    "message": message,
                    "type": "service_unavailable" if status == 503 else "invalid_request_error",
                    "param": None,
                    "code": _CODES[status],
                }
            }
        )
    )
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"x-request-id: %s\r\n" % request_id.encode("ascii"),
            b"retry-after: 1\r\n" if status == 503 else b"",  # a connection frees within the second
            b"connection: close\r\n\r\n",
            body,
        ]
    )


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guards: one connection; see the module docstring.

    Attributes:
        limits: the guards' settings, set on the subclass `guarded_protocol` makes.
    """

    limits: ClassVar[GuardLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._received_in_head = 0  # bytes read while a head is incomplete
        self._head_size = 0  # the current head's request line and headers, as parsed
        self._url_size = 0  # the current request line's target, as parsed so far
        self._refused = False
        self._deadline: asyncio.TimerHandle | None = None
        self._keep_alive_held = False  # the request's keep-alive, given back once its body is whole

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired, what)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _refuse(self, status: int, message: str) -> None:
        self._disarm()
        if not self._refused and not self.transport.is_closing():
            path = getattr(self, "url", b"").split(b"?", 1)[0]  # the request line's target, when it came
            anthropic = on_anthropic_surface(path.decode("latin-1"))
            self.transport.write(refusal(status, message, uuid.uuid4().hex, anthropic=anthropic))
            self.transport.close()
        self._refused = True

    def _too_large(self, head_bytes: int) -> None:
        # `head_bytes`: the head's bytes read (incomplete) or parsed (whole); its target the larger part → 414
        if self._url_size * 2 > head_bytes:
            self._refuse(
                414,
                f"The request's URL is too long: the request line and headers may be "
                f"{self.limits.max_header_bytes} bytes at most, and the URL alone is {self._url_size} bytes or more.",
            )
        else:
            self._refuse(431, f"The request's headers are larger than {self.limits.max_header_bytes} bytes.")

    def _expired(self, what: str) -> None:
        self._deadline = None
        if what == "head":
            self._refuse(408, f"The request's headers did not arrive within {self.limits.header_timeout_s:g} s.")
        elif self.cycle is not None and self.cycle.response_started:
            self.transport.close()
        else:
            self._refuse(408, f"The request's body did not arrive within {self.limits.body_timeout_s:g} s.")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(503, "The gateway has too many open connections; retry shortly.")
            return
        self._arm(self.limits.header_timeout_s, "head")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        self._keep_alive_held = False  # the server is stopping: nothing to give back
        super().shutdown()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            self._received_in_head += len(data)
        super().data_received(data)
        if self._in_head and self._received_in_head > self.limits.max_header_bytes:
            self._too_large(self._received_in_head)  # a head still incomplete after this many bytes

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer is plain text with no request id; this one is the gateway's error body
        self._refuse(400, "The request is not valid HTTP/1.1 and could not be read.")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_size = 0
        self._url_size = 0
        if self._deadline is None:  # a later request on a keep-alive connection
            self._arm(self.limits.header_timeout_s, "head")

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        self._url_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._received_in_head = 0
        if self._head_size > self.limits.max_header_bytes:
            self._too_large(self._head_size)  # a whole head that arrived at once
        if self._refused:
            return
        self._arm(self.limits.body_timeout_s, "body")
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before and self.cycle.keep_alive:  # a new request that may keep the connection
            self.cycle.keep_alive = False  # until its body is whole: an answer before then closes it
            self._keep_alive_held = True

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._disarm()
        self._in_head = True
        if self._keep_alive_held and not self.cycle.response_started:  # whole before any answer
            self.cycle.keep_alive = True
        self._keep_alive_held = False
        super().on_message_complete()


def guarded_protocol(limits: GuardLimits) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol class with the guards under `limits`, for `uvicorn.run(http=...)`."""

    class GuardedHttpToolsProtocol(GuardedProtocol):
        """One connection; see the module docstring."""

    GuardedHttpToolsProtocol.limits = limits
    return GuardedHttpToolsProtocol
