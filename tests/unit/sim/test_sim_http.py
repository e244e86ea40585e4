"""Real-HTTP tests of the simulator's JSON answers, errors, log and sequences."""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest

from support.waiting import eventually
from turnout_sim.app import start_in_background
from turnout_sim.clock import ManualClock
from turnout_sim.scenarios import ERROR_STATUSES

API_KEY = "test-key"  # the `client` fixture's key
Post = Callable[..., Coroutine[Any, Any, httpx.Response]]


def assert_error_shape(resp: httpx.Response) -> dict[str, Any]:
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert list(body) == ["error"]
    assert list(body["error"]) == ["message", "type", "param", "code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


async def test_plain_model_succeeds_with_full_completion(post: Post) -> None:
    resp = await post("gpt-4o-mini")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.headers["x-request-id"].startswith("req_")
    body = resp.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == "gpt-4o-mini"
    assert isinstance(body["created"], int)
    [choice] = body["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == " ".join(f"tok{i}" for i in range(12))
    assert body["usage"] == {
        "prompt_tokens": 2,
        "completion_tokens": 12,
        "total_tokens": 14,
    }


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [(1, 1), (5, 5), (10_000, 4096)],
    ids=["1", "5", "capped"],
)
async def test_max_tokens_sets_answer_length(post: Post, max_tokens: int, expected: int) -> None:
    body = (await post("m", max_tokens=max_tokens)).json()
    assert len(body["choices"][0]["message"]["content"].split()) == expected
    assert body["usage"]["completion_tokens"] == expected


# status -> (type, code)
EXPECTED_ERRORS: dict[int, tuple[str, object]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("request_forbidden", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    413: ("invalid_request_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    501: ("server_error", None),
    502: ("cf_bad_gateway", 502),
    503: ("server_error", None),
    504: ("cf_gateway_timeout", 504),
    505: ("server_error", None),
    529: ("overloaded_error", None),
}


def test_error_table_covers_every_status() -> None:
    assert set(EXPECTED_ERRORS) == ERROR_STATUSES


@pytest.mark.parametrize("status", sorted(EXPECTED_ERRORS), ids=str)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_bare_status_step(post: Post, status: int, stream: bool) -> None:
    resp = await post(f"st~{status}", stream=stream)
    assert resp.status_code == status
    error = assert_error_shape(resp)
    assert (error["type"], error["code"]) == EXPECTED_ERRORS[status]
    assert "retry-after" not in resp.headers and "retry-after-ms" not in resp.headers
    if status == 429:
        assert "Please try again in 2s." in error["message"]
    if status == 404:
        assert "`st~404` does not exist" in error["message"]


@pytest.mark.parametrize(
    ("step", "status", "type_", "code", "fragment"),
    [
        (
            "quota",
            429,
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota",
        ),
        (
            "ctx",
            400,
            "invalid_request_error",
            "context_length_exceeded",
            "maximum context length is 8192",
        ),
        (
            "policy",
            400,
            "invalid_request_error",
            "content_policy_violation",
            "safety system",
        ),
        ("403rl", 403, "requests", "rate_limit_exceeded", "Rate limit reached"),
    ],
    ids=["quota", "ctx", "policy", "403rl"],
)
async def test_named_error_steps(post: Post, step: str, status: int, type_: str, code: str, fragment: str) -> None:
    resp = await post(f"named~{step}")
    assert resp.status_code == status
    error = assert_error_shape(resp)
    assert (error["type"], error["code"]) == (type_, code)
    assert fragment in error["message"]


@pytest.mark.parametrize(
    ("step", "header", "value", "hint"),
    [
        ("429ra3", "retry-after", "3", "3s"),
        ("429ram250", "retry-after-ms", "250", "250ms"),
        ("429rr6m0s", "x-ratelimit-reset-requests", "6m0s", "6m0s"),
        ("429rr20ms", "x-ratelimit-reset-requests", "20ms", "20ms"),
    ],
    ids=["ra", "ram", "rr-6m0s", "rr-20ms"],
)
async def test_retry_hint_steps(post: Post, step: str, header: str, value: str, hint: str) -> None:
    resp = await post(f"hint~{step}")
    assert resp.status_code == 429
    assert resp.headers[header] == value
    error = assert_error_shape(resp)
    assert error["code"] == "rate_limit_exceeded"
    assert f"Please try again in {hint}." in error["message"]


async def test_retry_after_http_date(fake_clock_url: str, clock: ManualClock) -> None:
    async with httpx.AsyncClient(base_url=fake_clock_url, headers={"Authorization": "Bearer k"}) as c:
        resp = await c.post("/v1/chat/completions", json={"model": "d~429rad5", "messages": []})
    assert resp.status_code == 429
    value = resp.headers["retry-after"]
    assert value.endswith(" GMT") and len(value) == len("Sun, 06 Nov 1994 08:49:37 GMT")
    assert email.utils.parsedate_to_datetime(value).timestamp() == pytest.approx(clock.now_s + 5, abs=1)


@pytest.mark.parametrize(
    ("step", "type_", "code"),
    [
        ("bodyerr", "server_error", None),
        ("bodyerr429", "requests", "rate_limit_exceeded"),
    ],
    ids=["bodyerr", "bodyerr429"],
)
async def test_body_error_is_200_with_envelope(post: Post, step: str, type_: str, code: object) -> None:
    resp = await post(f"be~{step}")
    assert resp.status_code == 200
    error = assert_error_shape(resp)
    assert (error["type"], error["code"]) == (type_, code)


async def test_missing_or_empty_auth_is_401(sim_url: str) -> None:
    body = {"model": "m", "messages": []}
    async with httpx.AsyncClient(base_url=sim_url) as c:
        for headers in (
            {},
            {"Authorization": "Bearer"},
            {"Authorization": "Basic abc"},
        ):
            resp = await c.post("/v1/chat/completions", json=body, headers=headers)
            assert resp.status_code == 401
            error = assert_error_shape(resp)
            assert error["type"] == "invalid_request_error" and error["code"] is None
            assert "You didn't provide an API key" in error["message"]
        assert (await c.get("/v1/models")).status_code == 401
        log = (await c.get("/sim/log")).json()
    assert [(e["status"], e["step"]) for e in log] == [(401, None)] * 3
    assert log[0]["auth_fingerprint"] is None


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "could not parse the JSON body"),
        (b'{"messages": []}', "you must provide a model parameter"),
        (b'{"model": "m~200,teapot", "messages": []}', "Invalid simulator scenario"),
        (b'{"model": "m~", "messages": []}', "empty scenario"),
    ],
    ids=["bad-json", "no-model", "bad-step", "empty-steps"],
)
async def test_bad_requests_are_400(client: httpx.AsyncClient, content: bytes, fragment: str) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        content=content,
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400
    assert fragment in assert_error_shape(resp)["message"]


async def test_invalid_header_scenario_is_400(post: Post) -> None:
    resp = await post("m", headers={"x-sim-scenario": "200,wat"})
    assert resp.status_code == 400
    assert "step 2: step 'wat'" in assert_error_shape(resp)["message"]


async def test_sequence_advances_and_last_step_repeats(post: Post, client: httpx.AsyncClient) -> None:
    statuses = [(await post("seq~503,429,200")).status_code for _ in range(5)]
    assert statuses == [503, 429, 200, 200, 200]
    # a different label is a different sequence
    assert (await post("seq2~503,429,200")).status_code == 503
    log = (await client.get("/sim/log", params={"model": "seq~503,429,200"})).json()
    assert [e["step"] for e in log] == ["503", "429", "200", "200", "200"]
    assert [e["status"] for e in log] == statuses
    assert [e["seq"] for e in log] == [1, 2, 3, 4, 5]


async def test_header_scenario_overrides_and_is_keyed_with_model(post: Post) -> None:
    header = {"x-sim-scenario": "500,200"}
    assert (await post("h~429", headers=header)).status_code == 500
    assert (await post("other", headers=header)).status_code == 500  # own cursor per model
    assert (await post("h~429", headers=header)).status_code == 200
    assert (await post("h~429")).status_code == 429  # no header: the model's own steps


async def test_delete_log_clears_log_and_counters(post: Post, client: httpx.AsyncClient) -> None:
    assert (await post("clr~503,200")).status_code == 503
    assert (await post("clr~503,200")).status_code == 200
    resp = await client.delete("/sim/log")
    assert resp.status_code == 200 and resp.json() == {"cleared": 2}
    assert (await client.get("/sim/log")).json() == []
    assert (await post("clr~503,200")).status_code == 503
    assert [e["seq"] for e in (await client.get("/sim/log")).json()] == [1]


async def test_log_entry_fields(post: Post, client: httpx.AsyncClient) -> None:
    before = time.time()
    await post("lg~503", headers={"x-request-id": "abc-123"})
    await post("lg~503", stream=True)
    log = (await client.get("/sim/log")).json()
    first, second = log
    assert set(first) == {
        "seq",
        "t_s",
        "model",
        "step",
        "status",
        "stream",
        "auth_fingerprint",
        "request_id",
        "ended_s",
        "end",
    }
    assert first["model"] == "lg~503" and first["step"] == "503" and first["status"] == 503
    assert first["stream"] is False and second["stream"] is True
    assert first["request_id"] == "abc-123" and second["request_id"] is None
    fingerprint = hashlib.sha256(f"Bearer {API_KEY}".encode()).hexdigest()[:8]
    assert first["auth_fingerprint"] == fingerprint
    assert API_KEY not in str(log)
    assert before - 1 <= first["t_s"] <= second["t_s"] <= time.time() + 1
    assert first["end"] == second["end"] == "complete"
    assert first["t_s"] <= first["ended_s"] <= second["t_s"] <= second["ended_s"]


async def test_latency_is_logged_on_receipt_then_status_set(post: Post, client: httpx.AsyncClient) -> None:
    started = time.monotonic()
    task = asyncio.create_task(post("lat~200+3000ms"))
    log: list[dict[str, Any]] = []

    async def logged() -> bool:
        log[:] = (await client.get("/sim/log")).json()
        return bool(log)

    await eventually(logged, within_s=2.5)  # on receipt, well before the 3 s latency ends
    [pending] = log
    assert (pending["step"], pending["status"]) == ("200+3000ms", None)
    resp = await task
    assert resp.status_code == 200
    assert time.monotonic() - started >= 3.0
    [done] = (await client.get("/sim/log")).json()
    assert done["status"] == 200 and done["t_s"] == pending["t_s"]


async def test_down_window_uses_first_request_time(fake_clock_url: str, clock: ManualClock) -> None:
    async with httpx.AsyncClient(base_url=fake_clock_url, headers={"Authorization": "Bearer k"}) as c:

        async def status() -> int:
            resp = await c.post("/v1/chat/completions", json={"model": "dn~down2s", "messages": []})
            return resp.status_code

        assert await status() == 503
        clock.advance(1.5)
        assert await status() == 503
        clock.advance(0.6)  # 2.1 s after the first request
        assert await status() == 200
        assert await status() == 200
        assert (await c.delete("/sim/log")).status_code == 200
        assert await status() == 503  # counters cleared: the outage restarts


async def test_slow_json_sends_head_before_body(sim_url: str) -> None:
    body = {"model": "sl~slow400", "messages": []}
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer k"}, timeout=5) as c:
        started = time.monotonic()
        async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
            head_s = time.monotonic() - started
            assert resp.status_code == 200
            data = await resp.aread()
            body_s = time.monotonic() - started
    assert body_s >= 0.4 and body_s >= head_s  # lower bounds only: load delays, never hastens
    assert data.startswith(b"{") and b'"chat.completion"' in data


async def test_cut_json_closes_mid_body(post: Post) -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete|complete message body"):
        await post("ct~cut1")


async def test_stall_json_holds_connection(client: httpx.AsyncClient, sim_url: str) -> None:
    body = {"model": "stj~stall1", "messages": []}
    with pytest.raises(httpx.ReadTimeout):
        await client.post("/v1/chat/completions", json=body, timeout=0.25)
    [entry] = (await client.get("/sim/log")).json()
    assert entry["status"] == 200


async def test_badchunk_json_is_malformed_body(post: Post) -> None:
    resp = await post("bcj~badchunk1")
    assert resp.status_code == 200
    with pytest.raises(ValueError):
        resp.json()


async def test_reset_is_a_transport_error(post: Post, client: httpx.AsyncClient) -> None:
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await post("rs~reset")
    [entry] = (await client.get("/sim/log")).json()
    assert (entry["step"], entry["status"]) == ("reset", None)


async def test_close_before_response(post: Post) -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        await post("cl~close")


async def test_hang_times_out_client_side(client: httpx.AsyncClient) -> None:
    with pytest.raises(httpx.ReadTimeout):
        await client.post(
            "/v1/chat/completions",
            json={"model": "hg~hang", "messages": []},
            timeout=0.25,
        )
    [entry] = (await client.get("/sim/log")).json()
    assert (entry["step"], entry["status"]) == ("hang", None)


async def test_models_health_and_unknown_url(client: httpx.AsyncClient) -> None:
    models = (await client.get("/v1/models")).json()
    assert models["object"] == "list"
    assert {m["object"] for m in models["data"]} == {"model"} and len(models["data"]) >= 3
    assert (await client.get("/sim/health")).status_code == 200
    resp = await client.get("/v1/nope")
    assert resp.status_code == 404
    assert assert_error_shape(resp)["message"] == "Invalid URL (GET /v1/nope)"


async def test_shutdown_ends_held_connections_quickly() -> None:
    runner, url = await start_in_background("127.0.0.1", 0)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer k"}) as c:
        body = {"model": "sd~hang", "messages": []}
        task = asyncio.create_task(c.post("/v1/chat/completions", json=body, timeout=10))
        while not (await c.get("/sim/log")).json():
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await runner.cleanup()
        assert time.monotonic() - started < 1.5
        with pytest.raises(httpx.TransportError):
            await task
