"""`/metrics` labels: the request counter names each public route, the admin API "admin", anything else "other"."""

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
        ("/admin/v1/orgs", "admin"),
        ("/admin/v1/orgs/acme/keys/ci-bot/settings", "admin"),
        ("/admin/v1", "other"),
        ("/adminx/v1/orgs", "other"),
    ],
    ids=[
        "chat",
        "messages",
        "count-tokens",
        "unknown-messages-subroute",
        "models",
        "unknown",
        "admin",
        "admin-deep",
        "admin-root",
        "not-admin",
    ],
)
async def test_request_counter_labels_the_route(path: str, route: str) -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=RequestCounter(_ok, metrics))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        assert (await client.post(path)).status_code == 200
    assert metrics.registry.get_sample_value("turnout_requests_total", {"route": route, "status": "200"}) == 1.0


async def test_admin_requests_share_one_label_apart_from_unknown_paths() -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=RequestCounter(_created, metrics))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        for path in ("/admin/v1/orgs", "/admin/v1/orgs/acme/keys", "/admin/v1/orgs/beta/keys", "/nope"):
            assert (await client.post(path)).status_code == 201
    sample = metrics.registry.get_sample_value
    assert sample("turnout_requests_total", {"route": "admin", "status": "201"}) == 3.0
    assert sample("turnout_requests_total", {"route": "other", "status": "201"}) == 1.0
    routes = {s.labels["route"] for m in metrics.registry.collect() for s in m.samples if m.name == "turnout_requests"}
    assert routes == {"admin", "other"}


async def _created(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})
