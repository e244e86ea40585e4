"""Upstream requests built from the prepared part are the requests httpx's `build_request` builds
(same URL, headers in the same order, body, extensions), and the upstream clients keep and send
the cookies a provider sets while skipping the jar for answers that set none."""

from __future__ import annotations

import httpx
import pytest

from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES
from turnout.adapters.anthropic_wire import MESSAGES_PATH
from turnout.adapters.base import CallSpec, endpoint_url
from turnout.adapters.guarded import make_guarded_client
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.adapters.prepared import post_request
from turnout.adapters.transport import UpstreamClient, make_http_client
from turnout.core.types import Target
from turnout.rules.ssrf import AllowList

BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}'


def _clients() -> list[httpx.AsyncClient]:
    return [
        make_http_client(max_connections=4),
        make_guarded_client(max_connections=4, allow=AllowList.from_env({})),
        httpx.AsyncClient(),
    ]


def _spec(base_url: str) -> CallSpec:
    return CallSpec(
        target=Target(provider="p", model="m", catalog_model="m"),
        base_url=base_url,
        api_key="sk-test-0123",
        body=BODY,
        timeout_s=5,
        request_id="9c1e0b7a5d4f4e2a8b6c3d2e1f0a9b8c",
    )


def _shape(request: httpx.Request) -> tuple[object, ...]:
    return (request.method, str(request.url), request.headers.raw, request.content, request.extensions)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("base_url", ["https://api.example.com/v1", "http://127.0.0.1:9100/v1/", "http://h:80/x"])
async def test_an_openai_request_is_the_one_build_request_makes(base_url: str, stream: bool) -> None:
    for client in _clients():
        for _ in range(2):  # the first builds the prepared part, the second uses it
            built = OPENAI_CHAT.build_request(client, _spec(base_url), stream=stream)
            headers = {"authorization": "Bearer sk-test-0123", "content-type": "application/json"}
            if stream:
                headers["accept"] = "text/event-stream"
            headers["x-request-id"] = _spec(base_url).request_id
            expected = client.build_request(
                "POST", endpoint_url(base_url, "/chat/completions"), content=BODY, headers=headers
            )
            assert _shape(built) == _shape(expected)
        await client.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_anthropic_request_is_the_one_build_request_makes(stream: bool) -> None:
    for client in _clients():
        built = ANTHROPIC_MESSAGES.build_request(client, _spec("https://api.anthropic.example"), stream=stream)
        assert isinstance(built, httpx.Request)
        headers = {name: built.headers[name] for name in ("x-api-key", "anthropic-version", "content-type")}
        headers["x-request-id"] = _spec("").request_id
        if stream:
            headers["accept"] = "text/event-stream"
        expected = client.build_request(
            "POST", endpoint_url("https://api.anthropic.example", MESSAGES_PATH), content=built.content, headers=headers
        )
        assert _shape(built) == _shape(expected)
        await client.aclose()


async def test_a_client_holding_cookies_sends_them_as_build_request_does() -> None:
    client = make_http_client(max_connections=4)
    client.cookies.set("__cf_bm", "abc", domain="api.example.com")
    built = post_request(client, "https://api.example.com/v1", "/chat/completions", [("x-request-id", "r")], BODY)
    assert built.headers["cookie"] == "__cf_bm=abc"
    expected = client.build_request(
        "POST",
        endpoint_url("https://api.example.com/v1", "/chat/completions"),
        content=BODY,
        headers={"x-request-id": "r"},
    )
    assert _shape(built) == _shape(expected)
    await client.aclose()


@pytest.mark.parametrize(
    ("base_url", "error"),
    [("http://[::1/v1", httpx.InvalidURL), ("https://api.example.com/v1", UnicodeEncodeError)],
    ids=["bad-url", "non-ascii-header"],
)
def test_what_cannot_be_sent_raises_as_build_request_does(base_url: str, error: type[Exception]) -> None:
    client = UpstreamClient()
    headers = [("authorization", "Bearer clé")]
    with pytest.raises(error):
        client.build_request("POST", endpoint_url(base_url, "/c"), content=BODY, headers=dict(headers))
    with pytest.raises(error):
        post_request(client, base_url, "/c", headers, BODY)


async def test_the_upstream_client_keeps_the_cookies_a_provider_sets_and_sends_them() -> None:
    sent: list[str | None] = []

    def provider(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get("cookie"))
        if len(sent) == 2:
            return httpx.Response(200, headers={"set-cookie": "__cf_bm=xyz; Path=/"}, json={})
        return httpx.Response(200, json={})

    async with UpstreamClient(transport=httpx.MockTransport(provider)) as client:
        for _ in range(4):
            request = post_request(client, "https://api.example.com/v1", "/chat/completions", [], BODY)
            await client.send(request)
        assert sent == [None, None, "__cf_bm=xyz", "__cf_bm=xyz"]
        assert dict(client.cookies) == {"__cf_bm": "xyz"}
        client.cookies = {"a": "1"}  # the setter keeps the jar's kind
        assert dict(client.cookies) == {"a": "1"}
