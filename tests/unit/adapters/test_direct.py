"""The JSON exchange sent straight through aiohttp answers as the one sent through httpx.

Each case runs `call_json` twice against one local aiohttp server: once on the
direct path (`turnout.adapters.direct`, what the shared client uses) and once
forced through `httpx.AsyncClient.send`. The server must see the same request
and the caller must get the same result, for successes, errors, compressed
answers, cookies, redirects, resets and refused connections.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web

from support.answers import ERROR, SUCCESS
from turnout.adapters import exchange
from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.direct import send_json
from turnout.adapters.transport import direct_transport, make_http_client
from turnout.config import ProviderKind
from turnout.core.types import Target, TransportError

FAMILIES: list[ProviderKind] = ["openai", "anthropic"]

Answer = Callable[[web.Request, str], Any]
"""A server behaviour: (request, family) -> response (awaitable allowed)."""


def _family(request: web.Request) -> str:
    return "anthropic" if request.path == "/v1/messages" else "openai"


def _ok(request: web.Request, family: str) -> web.Response:
    return web.json_response(SUCCESS[family])


def _gzip(request: web.Request, family: str) -> web.Response:
    body = gzip.compress(json.dumps(SUCCESS[family]).encode())
    return web.Response(body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})


def _bad_gzip(request: web.Request, family: str) -> web.Response:
    return web.Response(
        body=b"not gzip at all", headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
    )


def _rate_limited(request: web.Request, family: str) -> web.Response:
    return web.json_response(ERROR[family], status=429, headers={"Retry-After": "7"})


def _cookie(request: web.Request, family: str) -> web.Response:
    response = web.json_response(SUCCESS[family])
    response.set_cookie("affinity", "node-7", path="/")
    return response


def _redirect(request: web.Request, family: str) -> web.Response:
    return web.Response(status=302, headers={"Location": "http://127.0.0.1:9/elsewhere"})


async def _reset(request: web.Request, family: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "4096"})
    await response.prepare(request)
    await response.write(b'{"id": "c1", "object": ')
    assert request.transport is not None
    request.transport.close()  # the connection drops mid-body
    return response


RELEASE = web.AppKey("release", asyncio.Event)
"""Set when the server closes: a stalled handler then ends."""


async def _stall(request: web.Request, family: str) -> web.Response:
    await request.app[RELEASE].wait()  # no answer until the test is over; the attempt's limit ends the call
    return web.Response(status=500)


class Upstream:
    """A local aiohttp server recording what it is sent; `answer` picks the reply."""

    def __init__(self) -> None:
        self.answer: Answer = _ok
        self.seen: list[tuple[str, str, list[tuple[str, str]], bytes]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = [(k.lower(), v) for k, v in request.headers.items() if k.lower() != "host"]
        self.seen.append((request.method, request.path_qs, headers, await request.read()))
        reply = self.answer(request, _family(request))
        return await reply if asyncio.iscoroutine(reply) else reply  # type: ignore[no-any-return]


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    server = Upstream()
    app = web.Application()
    app[RELEASE] = release = asyncio.Event()
    app.router.add_post("/{tail:.*}", server.handle)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}"
    yield server
    release.set()
    await runner.cleanup()


def _spec(kind: ProviderKind, base: str, *, timeout_s: float = 5.0) -> CallSpec:
    return CallSpec(
        target=Target(provider="p", model="m", catalog_model="m"),
        base_url=base + ("/" if kind == "anthropic" else "/v1/"),
        api_key="sk-test",
        body=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        timeout_s=timeout_s,
        request_id="rid-1",
        kind=kind,
    )


async def _via_httpx(client: httpx.AsyncClient, spec: CallSpec, monkeypatch: pytest.MonkeyPatch) -> AttemptResult:
    with monkeypatch.context() as patch:
        patch.setattr(exchange, "direct_transport", lambda _client: None)
        return await exchange.call_json(client, spec)


async def _direct(client: httpx.AsyncClient, spec: CallSpec, monkeypatch: pytest.MonkeyPatch) -> AttemptResult:
    async def refuse(*_args: object, **_kwargs: object) -> httpx.Response:
        raise AssertionError("the direct path went through httpx's send")

    with monkeypatch.context() as patch:
        patch.setattr(client, "send", refuse)
        return await exchange.call_json(client, spec)


async def _both(
    upstream: Upstream, kind: ProviderKind, monkeypatch: pytest.MonkeyPatch, *, calls: int = 1, **spec: Any
) -> tuple[list[AttemptResult], list[AttemptResult]]:
    """(direct results, httpx results), each from `calls` calls on a fresh shared client."""
    runs: list[list[AttemptResult]] = []
    seen: list[list[Any]] = []
    for path in (_direct, _via_httpx):
        upstream.seen = []
        client = make_http_client(max_connections=4)
        try:
            runs.append([await path(client, _spec(kind, upstream.url, **spec), monkeypatch) for _ in range(calls)])
        finally:
            await client.aclose()
        seen.append(upstream.seen)
    assert seen[0] == seen[1], "the server saw different requests"
    assert len(seen[0]) == calls
    return runs[0], runs[1]


def _stamped(body: bytes | None) -> Any:
    """`body` with the `created` stamp a translated Anthropic answer gets at read time set to 0."""
    return None if body is None else {**json.loads(body), "created": 0}


def _same(direct: AttemptResult, via_httpx: AttemptResult) -> None:
    assert direct.outcome == via_httpx.outcome
    assert _stamped(direct.body) == _stamped(via_httpx.body)
    assert direct.usage == via_httpx.usage


@pytest.mark.parametrize("kind", FAMILIES)
@pytest.mark.parametrize(
    "answer",
    [_ok, _gzip, _rate_limited, _redirect],
    ids=["success", "gzip", "429-retry-after", "redirect"],
)
async def test_an_answer_reads_the_same_on_both_paths(
    upstream: Upstream, kind: ProviderKind, answer: Answer, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.answer = answer
    [direct], [via_httpx] = await _both(upstream, kind, monkeypatch)
    _same(direct, via_httpx)
    if answer in (_ok, _gzip):
        assert direct.outcome.status == 200 and direct.body is not None and direct.usage.output_tokens == 2
    if answer is _rate_limited:
        assert direct.outcome.status == 429 and direct.outcome.retry_after_s == 7.0
    if answer is _redirect:
        assert direct.outcome.status == 302 and direct.body is None


@pytest.mark.parametrize("kind", FAMILIES)
async def test_a_cookie_the_provider_sets_is_sent_back_on_both_paths(
    upstream: Upstream, kind: ProviderKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.answer = _cookie
    direct, via_httpx = await _both(upstream, kind, monkeypatch, calls=2)
    assert len(direct) == len(via_httpx) == 2
    for one, other in zip(direct, via_httpx, strict=True):  # `created` is stamped at read time: not compared
        _same(one, other)
    assert ("cookie", "affinity=node-7") in upstream.seen[1][2]  # the second call carries it
    assert not any(name == "cookie" for name, _ in upstream.seen[0][2])


@pytest.mark.parametrize("kind", FAMILIES)
@pytest.mark.parametrize(
    ("answer", "transport"),
    [(_reset, TransportError.RESET), (_bad_gzip, None)],
    ids=["reset-mid-body", "corrupt-gzip"],
)
async def test_a_broken_answer_fails_the_same_on_both_paths(
    upstream: Upstream,
    kind: ProviderKind,
    answer: Answer,
    transport: TransportError | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream.answer = answer
    [direct], [via_httpx] = await _both(upstream, kind, monkeypatch)
    _same(direct, via_httpx)
    assert direct.outcome.transport is not None and direct.body is None
    if transport is not None:
        assert direct.outcome.transport is transport


@pytest.mark.parametrize("kind", FAMILIES)
async def test_an_answer_that_never_comes_is_the_attempts_timeout_on_both_paths(
    upstream: Upstream, kind: ProviderKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.answer = _stall
    [direct], [via_httpx] = await _both(upstream, kind, monkeypatch, timeout_s=0.05)
    _same(direct, via_httpx)
    assert direct.outcome.transport is TransportError.ATTEMPT_TIMEOUT


@pytest.mark.parametrize("kind", FAMILIES)
async def test_a_refused_connection_is_the_same_failure_on_both_paths(
    kind: ProviderKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    results = []
    for path in (_direct, _via_httpx):
        client = make_http_client(max_connections=1)
        try:
            results.append(await path(client, _spec(kind, closed), monkeypatch))
        finally:
            await client.aclose()
    _same(*results)
    assert results[0].outcome.transport is TransportError.CONNECT
    assert results[0].outcome.message.startswith("could not connect to the provider (")


async def test_send_json_raises_what_send_raises(upstream: Upstream) -> None:
    upstream.answer = _reset
    client = make_http_client(max_connections=1)
    transport = direct_transport(client)
    assert transport is not None
    raised: list[BaseException] = []
    try:
        for call in (lambda r: send_json(client, transport, r), client.send):
            request = client.build_request("POST", upstream.url + "/v1/chat/completions", content=b"{}")
            with pytest.raises(httpx.HTTPError) as caught:
                await call(request)
            raised.append(caught.value)
    finally:
        await client.aclose()
    assert type(raised[0]) is type(raised[1])
    assert type(raised[0].__cause__) is type(raised[1].__cause__)


async def test_only_the_shared_uninstrumented_client_takes_the_direct_path() -> None:
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.trace import TracerProvider

    plain = httpx.AsyncClient()
    shared = make_http_client(max_connections=1)
    instrumented = make_http_client(max_connections=1)
    try:
        assert direct_transport(plain) is None
        assert direct_transport(shared) is shared._transport  # the client's own transport
        assert direct_transport(instrumented) is not None
        HTTPXClientInstrumentor.instrument_client(instrumented, tracer_provider=TracerProvider())
        assert direct_transport(instrumented) is None  # spans need httpx's path
    finally:
        for client in (plain, shared, instrumented):
            await client.aclose()
