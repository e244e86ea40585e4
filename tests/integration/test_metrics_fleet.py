"""`/metrics` after 100 requests through a real fleet (#44 item 4): the ingress's end-to-end
duration and time-to-first-token histograms, and the token and cost counters of the process that
ran each attempt (the ingress runs `stream: true` requests, the worker the queued ones).

Run with `-s` to see the series and their values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.gateway import ACME_ORG, BREAKER_OFF, SIM_PROVIDERS, Gateway, running_gateway
from support.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEY = "tk-test-metrics-000000001"
IN_PRICE, OUT_PRICE = 2.5, 10.0  # USD per million tokens
PRICES = f"input_usd_per_mtok: {IN_PRICE}, output_usd_per_mtok: {OUT_PRICE}"
CONFIG = (
    SIM_PROVIDERS
    + f"""\
models:
  fast: {{{{offers: [{{{{provider: sim-a, model: "fast~200i5+30ms", {PRICES}}}}}]}}}}
  chain:
    order: priority
    offers:
      - {{{{provider: sim-a, model: "chain-a~503", {PRICES}}}}}
      - {{{{provider: sim-b, model: "chain-b~200+20ms", {PRICES}}}}}
"""
    + BREAKER_OFF
    + ACME_ORG
)
STREAMS, PLAIN, FALLBACKS = 30, 60, 10  # 100 requests


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[Gateway, int]]:
    port = free_port()
    env = {"TURNOUT_METRICS_PORT": str(port)}
    with running_gateway(CONFIG, env=env, key=KEY) as gw:
        yield gw, port


def series(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> {sorted labels: value} of an exposition."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return out


def total(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, **labels: str) -> float:
    """Sum of `name`'s samples whose labels include `labels`."""
    return sum(v for k, v in samples.get(name, {}).items() if set(labels.items()) <= set(k))


def quantile(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, q: float) -> float:
    """PromQL's `histogram_quantile(q, ...)` over all of `name`'s buckets (linear within a bucket), s."""
    buckets: dict[float, float] = defaultdict(float)
    for labels, value in samples.get(f"{name}_bucket", {}).items():
        if dict(labels).get("route") == "/v1/chat/completions":
            buckets[float(dict(labels)["le"])] += value
    bounds = sorted(buckets)
    rank, lower, below = q * buckets[bounds[-1]], 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            return lower + (bound - lower) * (rank - below) / max(buckets[bound] - below, 1e-9)
        lower, below = bound, buckets[bound]
    return lower


def send(gw: Gateway) -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    hi = [{"role": "user", "content": "hello there"}]
    with httpx.Client(base_url=gw.base_url, headers=headers, timeout=30) as client:
        for _ in range(STREAMS):
            with client.stream(
                "POST", "/v1/chat/completions", json={"model": "fast", "messages": hi, "stream": True}
            ) as r:
                assert r.status_code == 200 and "data: [DONE]" in r.read().decode()
        for model, n in (("fast", PLAIN), ("chain", FALLBACKS)):
            for _ in range(n):
                r = client.post("/v1/chat/completions", json={"model": model, "messages": hi})
                assert r.status_code == 200, r.text


def test_metrics_after_100_requests_count_tokens_cost_duration_and_ttft(fleet: tuple[Gateway, int]) -> None:
    gw, port = fleet
    send(gw)
    texts = {
        "ingress": httpx.get(f"{gw.base_url}/metrics", timeout=10).text,
        "worker": httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text,
    }
    ingress, worker = (series(texts[p]) for p in ("ingress", "worker"))
    chat = {"route": "/v1/chat/completions"}
    assert total(ingress, "turnout_requests_total", **chat, status="200") == 100
    duration = "turnout_http_server_request_duration_seconds"
    assert total(ingress, f"{duration}_count", **chat, status_class="2xx") == 100
    ttft = "turnout_gen_ai_server_time_to_first_token_seconds"
    assert total(ingress, f"{ttft}_count", **chat, provider="sim-a") == STREAMS
    assert total(ingress, f"{ttft}_sum", **chat) / STREAMS >= 0.03  # the simulator waits 30 ms before the head
    tokens = "turnout_gen_ai_client_token_usage_total"
    acme = {"org": "acme"}
    out_tokens = {
        p: total(s, tokens, **acme, token_type="output") for p, s in (("ingress", ingress), ("worker", worker))
    }
    in_tokens = {p: total(s, tokens, **acme, token_type="input") for p, s in (("ingress", ingress), ("worker", worker))}
    assert out_tokens == {"ingress": STREAMS * 12, "worker": (PLAIN + FALLBACKS) * 12}  # the simulator's 12 words
    cost = {p: total(s, "turnout_cost_usd_total", **acme) for p, s in (("ingress", ingress), ("worker", worker))}
    for process, usd in cost.items():
        assert usd == pytest.approx((in_tokens[process] * IN_PRICE + out_tokens[process] * OUT_PRICE) / 1e6)
    assert total(worker, "turnout_fallbacks_total", model="chain") == FALLBACKS
    assert "_created" not in texts["ingress"] + texts["worker"]
    print()
    for name in (duration, ttft):
        print(f"{name}: p50 {quantile(ingress, name, 0.5):.3f} s, p95 {quantile(ingress, name, 0.95):.3f} s")
    for process, text in texts.items():
        for line in text.splitlines():
            if line.startswith(("turnout_gen_ai", "turnout_cost", "turnout_http_server", "turnout_fallbacks")) and (
                "_bucket" not in line or 'le="0.1"' in line or 'le="0.25"' in line or 'le="+Inf"' in line
            ):
                print(f"{process}: {line}")
