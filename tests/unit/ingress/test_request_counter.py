"""`/metrics` labels: the request counter names each public route, anything else "other"."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from turnout.observability.metrics import Metrics
from turnout_ingress.ops_routes import RequestCounter


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/v1/chat/completions", "/v1/chat/completions"),
        ("/v1/messages", "/v1/messages"),
        ("/v1/messages/count_tokens", "/v1/messages/count_tokens"),
        ("/v1/messages/nope", "other"),
        ("/v1/models", "/v1/models"),
        ("/anything/else", "other"),
    ],
    ids=["chat", "messages", "count-tokens", "unknown-messages-subroute", "models", "unknown"],
)
async def test_request_counter_labels_the_route(path: str, route: str) -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=RequestCounter(_ok, metrics))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        assert (await client.post(path)).status_code == 200
    assert metrics.registry.get_sample_value("turnout_requests_total", {"route": route, "status": "200"}) == 1.0
