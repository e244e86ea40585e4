"""The official openai SDK through the whole fleet: ingress → Redis → worker → simulator."""

from __future__ import annotations

import gzip
import threading
import time

import httpx
import msgspec
import openai
import pytest
import redis

from support.gateway import KEY, KEY_CYCLES, KEY_DEADLINE, KEY_REROUTE, KEY_WORKED, Gateway
from turnout.state import keys

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "hello"}]


def _create(gw: Gateway, model: str, key: str = KEY) -> tuple[dict[str, str], object]:
    raw = gw.client(key).chat.completions.with_raw_response.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    return dict(raw.headers), raw.parse()


def _error(gw: Gateway, model: str, key: str = KEY) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        gw.client(key).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    return info.value


def test_route_success_served_by_the_only_offer(gateway: Gateway) -> None:
    headers, completion = _create(gateway, "ok")
    assert completion.choices[0].message.content.startswith("tok0")  # type: ignore[attr-defined]
    assert headers["x-turnout-provider"] == "sim-a"
    assert headers["x-turnout-model"] == "ok"
    assert headers["x-turnout-attempts"] == "1"
    assert headers["x-turnout-fallback"] == "0"
    assert len(headers["x-request-id"]) == 32


def test_route_503_then_200_same_provider_two_attempts(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "flaky")
    assert headers["x-turnout-attempts"] == "2"
    assert headers["x-turnout-fallback"] == "0"
    assert [e["status"] for e in gateway.sim_log("flaky~503,200")] == [503, 200]


def test_route_persistent_503_second_provider_serves(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "down-primary")
    assert headers["x-turnout-provider"] == "sim-b"
    assert headers["x-turnout-model"] == "dp-b"
    assert headers["x-turnout-fallback"] == "1"
    assert headers["x-turnout-attempts"] == "3"
    assert len(gateway.sim_log("dp-a~503")) == 2


def test_route_spec_worked_example_three_attempts_second_provider(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "worked", KEY_WORKED)
    assert headers["x-turnout-attempts"] == "3"
    assert headers["x-turnout-provider"] == "sim-b"
    assert headers["x-turnout-fallback"] == "1"
    assert [e["status"] for e in gateway.sim_log("we-a~503")] == [503, 503]
    assert [e["status"] for e in gateway.sim_log("we-b")] == [200]


def test_route_spec_worked_example_401_is_one_attempt(gateway: Gateway) -> None:
    err = _error(gateway, "worked-401", KEY_WORKED)
    assert err.status_code == 401
    assert err.response.headers["x-turnout-attempts"] == "1"
    assert "rejected the request" in err.message
    assert len(gateway.sim_log("w401-a~401")) == 1
    assert gateway.sim_log("w401-b") == []


def test_route_400_passed_through_after_one_attempt(gateway: Gateway) -> None:
    err = _error(gateway, "bad-400")
    assert err.status_code == 400
    assert err.response.headers["x-turnout-attempts"] == "1"
    assert len(gateway.sim_log("b400~400")) == 1


def test_route_every_offer_failing_is_502_provider_failed_with_summary(gateway: Gateway) -> None:
    err = _error(gateway, "all-fail")
    assert err.status_code == 502
    body = err.body
    assert isinstance(body, dict)
    assert body["code"] == "provider_failed"
    assert "a request sent later may succeed" in body["message"]
    assert [(a["provider"], a["status"]) for a in body["attempts"]] == [("sim-a", 503), ("sim-a", 503), ("sim-b", 500)]
    assert err.response.headers["x-should-retry"] == "false"


def test_route_deadline_is_504_budget_exhausted(gateway: Gateway) -> None:
    started = time.monotonic()
    err = _error(gateway, "hang", KEY_DEADLINE)
    elapsed = time.monotonic() - started
    assert err.status_code == 504
    assert isinstance(err.body, dict) and err.body["code"] == "budget_exhausted"
    assert elapsed < 10  # answered near the 1.5 s budget, never a hang


def test_route_retry_after_two_seconds_is_honoured(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "retry-after")
    log = gateway.sim_log("ra2~429ra2,200")
    assert [e["status"] for e in log] == [429, 200]
    assert float(log[1]["t_s"]) - float(log[0]["t_s"]) >= 2.0  # type: ignore[arg-type]
    assert headers["x-turnout-attempts"] == "2"


def test_route_retry_after_longer_than_max_falls_back_at_once(gateway: Gateway) -> None:
    started = time.monotonic()
    headers, _ = _create(gateway, "retry-after-90")
    assert time.monotonic() - started < 5
    assert headers["x-turnout-provider"] == "sim-b"
    assert len(gateway.sim_log("ra90-a~429ra90")) == 1


def test_route_quota_exhausted_falls_back_without_retry(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "quota")
    assert headers["x-turnout-provider"] == "sim-b"
    assert headers["x-turnout-attempts"] == "2"
    assert len(gateway.sim_log("q-a~quota")) == 1


def test_route_context_length_goes_to_the_larger_model(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "ctx-small")
    assert headers["x-turnout-model"] == "ctx-b"
    assert headers["x-turnout-attempts"] == "2"
    assert len(gateway.sim_log("ctx-a~ctx")) == 1


def test_route_model_fallback_from_org_settings(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "fb-primary")
    assert headers["x-turnout-model"] == "fbs"
    assert headers["x-turnout-fallback"] == "1"


def test_route_reroute_all_failing_never_contacts_requested_model(gateway: Gateway) -> None:
    err = _error(gateway, "rr-orig", KEY_REROUTE)
    assert err.status_code == 502
    assert gateway.sim_log("rr-orig") == []
    assert len(gateway.sim_log("rr-x~503")) == 2
    assert len(gateway.sim_log("rr-y~502")) == 1


def test_route_max_cycles_restarts_the_plan_from_the_primary(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "cycle", KEY_CYCLES)
    assert headers["x-turnout-attempts"] == "3"
    assert headers["x-turnout-provider"] == "sim-a"
    assert [e["status"] for e in gateway.sim_log("cyc-a~503,200")] == [503, 200]
    assert [e["status"] for e in gateway.sim_log("cyc-b~502")] == [502]


def test_route_pinned_provider_model_keeps_only_that_provider(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "sim-b/pinned")
    assert headers["x-turnout-provider"] == "sim-b"
    assert gateway.sim_log("pin-a") == []


def test_route_provider_without_credential_is_skipped(gateway: Gateway) -> None:
    headers, _ = _create(gateway, "nokey")
    assert headers["x-turnout-provider"] == "sim-b"
    assert headers["x-turnout-attempts"] == "1"
    assert gateway.sim_log("nk-a") == []


def test_route_client_disconnect_cancels_the_upstream_call(gateway: Gateway) -> None:
    def call() -> None:
        try:
            httpx.post(
                f"{gateway.base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {KEY}"},
                json={"model": "cancel", "messages": MESSAGES},
                timeout=1.0,
            )
        except httpx.TimeoutException:
            pass

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(gateway.sim_log("cancel~hang")) < 1:
        time.sleep(0.05)
    time.sleep(1.0)
    # one attempt reached the simulator, and the job was cancelled rather than retried
    assert len(gateway.sim_log("cancel~hang")) == 1


# --- bad input: an OpenAI-format error, and nothing enqueued -----------------------------------


def _queue_size(gw: Gateway) -> int:
    with redis.Redis.from_url(gw.redis_url) as client:
        return int(client.zcard(keys.QUEUE)) + len(
            client.keys(keys.JOB_PREFIX.replace("{", "\\{").replace("}", "\\}") + "*")
        )


def _post(gw: Gateway, content: bytes, key: str | None = KEY, **headers: str) -> httpx.Response:
    hdrs = {"content-type": "application/json", **headers}
    if key is not None:
        hdrs["authorization"] = f"Bearer {key}"
    return httpx.post(f"{gw.base_url}/v1/chat/completions", content=content, headers=hdrs, timeout=10)


BAD_INPUTS = [
    pytest.param(b"{not json", KEY, 400, "body", id="bad-json"),
    pytest.param(b"", KEY, 400, "body", id="empty-body"),
    pytest.param(b"[1, 2]", KEY, 400, "body", id="not-an-object"),
    pytest.param(
        b'{"model": "ok", "messages": [{"role": "user"}], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        KEY,
        400,
        "body",
        id="nested-too-deeply",
    ),
    pytest.param(
        b'{"model": "ok", "messages": [{"role": ["user"]}]}', KEY, 400, "messages[0].role", id="role-is-an-array"
    ),
    pytest.param(b'{"messages": [{"role": "user", "content": "x"}]}', KEY, 400, "model", id="missing-model"),
    pytest.param(b'{"model": "ok"}', KEY, 400, "messages", id="missing-messages"),
    pytest.param(b'{"model": "ok", "messages": []}', KEY, 400, "messages", id="empty-messages"),
    pytest.param(b'{"model": "ok", "messages": [{"role": "wizard"}]}', KEY, 400, "messages[0].role", id="bad-role"),
    pytest.param(
        b'{"model": "ok", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}',
        KEY,
        400,
        "max_tokens",
        id="negative-max-tokens",
    ),
    pytest.param(
        b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', KEY, 404, "model", id="unknown-model"
    ),
    pytest.param(b'{"model": "ok", "messages": [{"role": "user", "content": "x"}]}', None, 401, None, id="no-key"),
    pytest.param(
        b'{"model": "ok", "messages": [{"role": "user", "content": "x"}]}',
        "tk-wrong-key-123",
        401,
        None,
        id="wrong-key",
    ),
    pytest.param(
        b'{"model": "ok", "messages": [{"role": "user", "content": "' + b"x" * 70000 + b'"}]}',
        KEY,
        413,
        None,
        id="oversized",
    ),
]


@pytest.mark.parametrize(("content", "key", "status", "param"), BAD_INPUTS)
def test_ingress_bad_input_is_an_openai_error_and_nothing_is_enqueued(
    gateway: Gateway, content: bytes, key: str | None, status: int, param: str | None
) -> None:
    before = _queue_size(gateway)
    response = _post(gateway, content, key)
    assert response.status_code == status
    error = msgspec.json.decode(response.content)["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["message"]
    assert error["param"] == param
    assert _queue_size(gateway) == before == 0


OPENAI_REFUSES = [
    pytest.param({"seed": "x"}, "seed", id="seed-not-an-integer"),
    pytest.param({"logit_bias": {"x": 1000}}, "logit_bias", id="logit-bias-not-a-token-id"),
    pytest.param({"logit_bias": {"50256": 1000}}, "logit_bias.50256", id="logit-bias-out-of-range"),
    pytest.param({"stop": [str(i) for i in range(10)]}, "stop", id="ten-stop-sequences"),
    pytest.param({"tools": [{"type": "zzz", "function": {"name": "f"}}]}, "tools[0].type", id="unknown-tool-type"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(("extra", "param"), OPENAI_REFUSES)
def test_ingress_refuses_what_openai_refuses_streaming_or_not(
    gateway: Gateway, extra: dict[str, object], param: str, stream: bool
) -> None:
    before = _queue_size(gateway)
    content = msgspec.json.encode({"model": "ok", "messages": MESSAGES, "stream": stream, **extra})
    response = _post(gateway, content)
    assert response.status_code == 400
    error = msgspec.json.decode(response.content)["error"]
    assert (error["param"], error["code"], error["type"]) == (param, "invalid_request", "invalid_request_error")
    assert _queue_size(gateway) == before == 0


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_ingress_passes_an_unknown_field_through(gateway: Gateway, stream: bool) -> None:
    content = msgspec.json.encode({"model": "ok", "messages": MESSAGES, "stream": stream, "frobnicate": {"a": 1}})
    response = _post(gateway, content)
    assert response.status_code == 200, response.text


def test_ingress_compressed_body_is_a_415_naming_the_encoding(gateway: Gateway) -> None:
    body = b'{"model": "ok", "messages": [{"role": "user", "content": "x"}]}'
    before = _queue_size(gateway)
    response = _post(gateway, gzip.compress(body), **{"content-encoding": "gzip"})
    assert response.status_code == 415
    error = msgspec.json.decode(response.content)["error"]
    assert error["code"] == "unsupported_content_encoding" and "`gzip`" in error["message"]
    assert _post(gateway, body, **{"content-encoding": "identity"}).status_code == 200
    assert _queue_size(gateway) == before == 0


def test_ingress_missing_and_wrong_key_get_the_same_body(gateway: Gateway) -> None:
    body = b'{"model": "ok", "messages": [{"role": "user", "content": "x"}]}'
    assert _post(gateway, body, None).content == _post(gateway, body, "tk-wrong-key-123").content


def test_ingress_models_lists_the_catalog(gateway: Gateway) -> None:
    models = gateway.client().models.list()
    ids = {m.id for m in models.data}
    assert {"ok", "worked", "ctx-large"} <= ids


def test_ingress_sdk_raises_authentication_error_for_a_wrong_key(gateway: Gateway) -> None:
    with pytest.raises(openai.AuthenticationError):
        gateway.client("tk-wrong-key-123").chat.completions.create(model="ok", messages=MESSAGES)  # type: ignore[arg-type]
