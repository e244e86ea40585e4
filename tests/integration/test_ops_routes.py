"""Operator routes: provider health scoped to the caller, Prometheus metrics."""

from __future__ import annotations

import re
import socket
from typing import Any
from urllib.parse import urlparse

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.gateway import KEY, KEY_ADMIN, OPERATOR, Gateway

pytestmark = pytest.mark.integration


def _samples(gw: Gateway) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{gw.base_url}/metrics").text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _health(gateway: Gateway, key: str) -> dict[str, dict[str, Any]]:
    response = httpx.get(f"{gateway.base_url}/v1/health/providers", headers={"authorization": f"Bearer {key}"})
    assert response.status_code == 200
    return {row["target"]: row for row in response.json()["data"]}


def test_health_providers_lists_every_pair_with_its_last_error_for_the_operator(gateway: Gateway) -> None:
    gateway.client().chat.completions.create(model="ops-check", messages=[{"role": "user", "content": "x"}])
    rows = _health(gateway, OPERATOR)
    failing = rows["sim-a/ops-a~503"]
    assert failing["state"] in {"closed", "open"}
    assert failing["calls"] > 1.5 and failing["score"] < 1
    assert "503" in failing["last_error"]
    assert rows["sim-b/ops-b"]["score"] == 1.0
    assert set(failing) >= {
        "provider",
        "model",
        "state",
        "score",
        "calls",
        "consecutive_failures",
        "cooldown_remaining_s",
        "resting_s",
        "slow_start_share",
        "sole",
        "trip_rule",
    }


def test_health_providers_shows_an_org_admin_its_usable_pairs_without_shared_errors(gateway: Gateway) -> None:
    gateway.client().chat.completions.create(model="ops-check", messages=[{"role": "user", "content": "x"}])
    rows = _health(gateway, KEY_ADMIN)
    assert rows["sim-a/ops-a~503"]["calls"] > 1.5 and rows["sim-b/ops-b"]["score"] == 1.0
    assert all(row["last_error"] is None for row in rows.values())  # another org's attempt may have caused it
    assert not any(row["provider"] == "sim-nokey" for row in rows.values())  # no platform key, no own key


def test_health_providers_refuses_a_non_admin_key(gateway: Gateway) -> None:
    response = httpx.get(f"{gateway.base_url}/v1/health/providers", headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "admin_key_required"
    assert httpx.get(f"{gateway.base_url}/v1/health/providers").status_code == 401


def test_metrics_parse_and_count_requests(gateway: Gateway) -> None:
    before = _samples(gateway).get(
        ("turnout_requests_total", (("route", "/v1/chat/completions"), ("status", "200"))), 0.0
    )
    gateway.client().chat.completions.create(model="ok", messages=[{"role": "user", "content": "x"}])
    after = _samples(gateway)
    assert after[("turnout_requests_total", (("route", "/v1/chat/completions"), ("status", "200")))] == before + 1
    assert ("turnout_breaker_state", (("target", "sim-a/ok"),)) in after
    assert ("turnout_queue_depth", ()) in after


def test_metrics_count_admin_requests_apart_from_unknown_paths(gateway: Gateway) -> None:
    admin = ("turnout_requests_total", (("route", "admin"), ("status", "200")))
    unknown = ("turnout_requests_total", (("route", "other"), ("status", "404")))
    before = _samples(gateway)
    listed = httpx.get(f"{gateway.base_url}/admin/v1/orgs", headers={"authorization": f"Bearer {OPERATOR}"})
    assert listed.status_code == 200
    assert httpx.get(f"{gateway.base_url}/no/such/path").status_code == 404
    after = _samples(gateway)
    assert after[admin] == before.get(admin, 0.0) + 1
    assert after[unknown] == before.get(unknown, 0.0) + 1
    assert not any(name == "turnout_requests_total" and "/admin" in dict(labels)["route"] for name, labels in after)


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", "/v1/chat/completions/", 404, "unknown_route"),  # no 307 to the slashless route
        ("GET", "/v1/models/", 404, "unknown_route"),
        ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
        ("GET", "/v1/" + "x" * 5000, 404, "unknown_route"),
    ],
)
def test_unknown_routes_and_methods_get_one_json_shape(
    gateway: Gateway, method: str, path: str, status: int, code: str
) -> None:
    response = httpx.request(
        method, f"{gateway.base_url}{path}", headers={"authorization": f"Bearer {KEY}"}, follow_redirects=False
    )
    assert response.status_code == status and response.json()["error"]["code"] == code
    message = response.json()["error"]["message"]
    assert len(message) < 400 and ("characters)" in message) == (len(path) > 200)
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers.get("x-request-id", "")), "every answer names its request"


def test_an_unknown_route_names_the_path_as_sent_never_a_decoded_line_break(gateway: Gateway) -> None:
    response = httpx.get(f"{gateway.base_url}/v1/no%0Asuch%20route", headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Unknown route. (GET /v1/no%0Asuch%20route)"


def test_one_model_is_retrievable_with_the_sdks_and_an_unknown_one_is_404_in_each_shape(gateway: Gateway) -> None:
    client = openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key=KEY, max_retries=0)
    assert client.models.retrieve("ok").id == "ok"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("no-such-model")
    assert info.value.body["code"] == "model_not_found" and info.value.body["param"] == "model"  # type: ignore[index]
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    found = httpx.get(f"{gateway.base_url}/v1/models/ok", headers=headers)
    assert found.status_code == 200 and found.json()["type"] == "model" and found.json()["id"] == "ok"
    missing = httpx.get(f"{gateway.base_url}/v1/models/{'x' * 5000}", headers=headers)
    assert missing.status_code == 404 and missing.json()["type"] == "error"
    assert missing.json()["error"]["type"] == "not_found_error" and len(missing.text) < 600
    assert httpx.get(f"{gateway.base_url}/v1/models/ok").status_code == 401  # a gateway key is needed


def _raw_answer(gateway: Gateway, request: bytes) -> bytes:
    """Every byte the ingress sends for one `request` (it says `connection: close`), until it closes."""
    url = urlparse(gateway.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    ("path", "key"), [("/health/liveness", None), ("/health/readiness", None), ("/v1/models", KEY)]
)
def test_head_answers_a_get_route_with_its_status_and_headers_and_no_content(
    gateway: Gateway, path: str, key: str | None
) -> None:
    auth = f"authorization: Bearer {key}\r\n".encode() if key else b""
    request = b"%s %s HTTP/1.1\r\nhost: x\r\n%sconnection: close\r\n\r\n"
    get = _raw_answer(gateway, request % (b"GET", path.encode(), auth))
    head = _raw_answer(gateway, request % (b"HEAD", path.encode(), auth))
    get_head, _, content = get.partition(b"\r\n\r\n")
    assert get_head.startswith(b"HTTP/1.1 200 ") and content
    assert head.endswith(b"\r\n\r\n") and head.count(b"\r\n\r\n") == 1  # the head only
    shown = {line.partition(b":")[0].lower() for line in get_head.split(b"\r\n")[1:]}
    assert {line.partition(b":")[0].lower() for line in head.split(b"\r\n")[1:-2]} == shown
    assert head.split(b"\r\n")[0] == get_head.split(b"\r\n")[0]
    assert re.search(rb"\r\ncontent-length: %d\r\n" % len(content), head), head


def test_a_405_allows_every_method_of_the_path_head_included(gateway: Gateway) -> None:
    operator = {"authorization": f"Bearer {OPERATOR}"}
    refused = httpx.request("TRACE", f"{gateway.base_url}/admin/v1/orgs", headers=operator)
    assert refused.status_code == 405 and refused.headers.get_list("allow") == ["GET, HEAD, POST"]
    assert httpx.head(f"{gateway.base_url}/admin/v1/orgs", headers=operator).status_code == 200
