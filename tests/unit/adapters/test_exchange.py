"""The exchange seam: a URL that cannot be sent is a failed attempt, never an exception."""

from __future__ import annotations

import httpx
import pytest

from turnout.adapters.openai_chat import call_chat
from turnout.adapters.openai_stream import open_stream
from turnout.core.types import TransportError

BAD_URLS = ["http://[::1/v1", "https://a.example\r\n/v1", "https://xn--/v1", "https://a.example/v1\x00"]


@pytest.mark.parametrize("base_url", BAD_URLS, ids=["ipv6-bracket", "crlf", "idna", "nul"])
async def test_an_unparseable_base_url_is_a_connect_failure(base_url: str) -> None:
    sent: list[httpx.Request] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200))) as c:
        plain = await call_chat(c, base_url=base_url, api_key="k", body=b"{}", timeout_s=1, request_id="r")
        stream = await open_stream(c, base_url=base_url, api_key="k", body=b"{}", timeout_s=1, ttft_timeout_s=None,
                                   request_id="r")
    for result in (plain, stream):
        assert result.outcome.transport is TransportError.CONNECT and result.outcome.status is None
        assert result.outcome.message.startswith("the provider's URL cannot be used (")
    assert not sent
