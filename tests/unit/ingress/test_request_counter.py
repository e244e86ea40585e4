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


class _Ticks:
    """A clock that moves 0.5 s each time it is read (arrival 0, then 0.5, 1.0, ...)."""

    def __init__(self) -> None:
        self.now = -0.5

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def _stream(status: int = 200, provider: bytes = b"sim-a"):  # type: ignore[no-untyped-def]
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"x-turnout-provider", provider)]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for chunk in (b"data: first\n\n", b"data: second\n\n"):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def test_duration_is_from_arrival_to_the_last_byte_by_route_and_status_class() -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=RequestCounter(_ok, metrics, clock=_Ticks()))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        assert (await client.post("/v1/chat/completions")).status_code == 200
    sample = metrics.registry.get_sample_value
    labels = {"route": "/v1/chat/completions", "status_class": "2xx"}
    assert sample("turnout_http_server_request_duration_seconds_count", labels) == 1.0
    assert sample("turnout_http_server_request_duration_seconds_sum", labels) == 0.5  # arrival 0, last byte 0.5
    assert sample("turnout_gen_ai_server_time_to_first_token_seconds_count", {"route": "/v1/chat/completions"}) is None


async def test_a_streams_first_content_is_its_time_to_first_token_by_serving_provider() -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=RequestCounter(_stream(), metrics, clock=_Ticks()))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        assert (await client.post("/v1/chat/completions")).status_code == 200
    sample = metrics.registry.get_sample_value
    ttft = {"route": "/v1/chat/completions", "provider": "sim-a"}
    assert sample("turnout_gen_ai_server_time_to_first_token_seconds_count", ttft) == 1.0
    assert sample("turnout_gen_ai_server_time_to_first_token_seconds_sum", ttft) == 0.5  # the first chunk only
    duration = {"route": "/v1/chat/completions", "status_class": "2xx"}
    assert sample("turnout_http_server_request_duration_seconds_sum", duration) == 1.0


async def test_an_error_answer_of_a_stream_request_has_no_time_to_first_token() -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=RequestCounter(_stream(status=502), metrics, clock=_Ticks()))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        assert (await client.post("/v1/chat/completions")).status_code == 502
    sample = metrics.registry.get_sample_value
    assert (
        sample(
            "turnout_gen_ai_server_time_to_first_token_seconds_count",
            {"route": "/v1/chat/completions", "provider": "sim-a"},
        )
        is None
    )
    assert (
        sample(
            "turnout_http_server_request_duration_seconds_count",
            {"route": "/v1/chat/completions", "status_class": "5xx"},
        )
        == 1.0
    )
