"""`TURNOUT_METRICS_TOKEN`: `/metrics` answers only scrapes that carry the bearer token (#40 item 6)."""

from __future__ import annotations

import httpx

from turnout.observability.metrics import Metrics
from turnout.observability.metrics_auth import bearer_ok, serve_metrics
from turnout.settings import Settings

TOKEN = "metrics-token-0000000000000001"


def test_only_the_exact_bearer_token_passes() -> None:
    assert bearer_ok(f"Bearer {TOKEN}", TOKEN) and bearer_ok(f"bearer {TOKEN}", TOKEN)
    assert (
        not bearer_ok("", TOKEN) and not bearer_ok(f"Basic {TOKEN}", TOKEN) and not bearer_ok(f"Bearer {TOKEN}x", TOKEN)
    )
    assert Settings.from_env({"TURNOUT_METRICS_TOKEN": TOKEN}).metrics_token == TOKEN
    assert Settings.from_env({}).metrics_token is None


def test_the_side_port_refuses_a_scrape_without_the_token() -> None:
    metrics = Metrics()
    server = serve_metrics("127.0.0.1", 0, metrics.registry, TOKEN)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        refused = httpx.get(url)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        assert TOKEN not in refused.text
        assert httpx.get(url, headers={"authorization": "Bearer wrong"}).status_code == 401
        scraped = httpx.get(url, headers={"authorization": f"Bearer {TOKEN}"})
        assert scraped.status_code == 200 and "turnout_requests" in scraped.text
    finally:
        server.shutdown()
        server.server_close()
