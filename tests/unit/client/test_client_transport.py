"""`turnout_client` transports under the official SDKs, against a mock gateway.

The inner transport is the HTTP package's `MockTransport`, so the SDKs'
own retry loops run for real (a retry waits `retry-after-ms: 1`).
"""

from __future__ import annotations

import asyncio
import importlib
import json
from types import ModuleType
from typing import Any

import anthropic
import openai
import pytest

from turnout_client import (
    GatewayRouting,
    IdempotencyKeys,
    async_gateway_http_client,
    gateway_http_client,
    routing_of,
)

MESSAGES = [{"role": "user", "content": "hi"}]
PACKAGES = [name for name in ("httpx", "httpx2") if importlib.util.find_spec(name) is not None]


def _completion(model: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": f"from {model}"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }


class MockGateway:
    """Answers by the requested model; records every request it saw."""

    def __init__(self, pkg: ModuleType) -> None:
        self.pkg = pkg
        self.seen: list[tuple[str, str | None, str | None]] = []  # (model, idempotency key, retry count)
        self.failures_left = 1

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        model = body["model"]
        self.seen.append(
            (model, request.headers.get("idempotency-key"), request.headers.get("x-stainless-retry-count"))
        )
        served = {
            "x-request-id": f"r{len(self.seen)}",
            "x-turnout-attempts": "1",
            "x-turnout-provider": "p1",
            "x-turnout-model": f"{model}-v1",
            "x-turnout-fallback": "0",
        }
        if model == "exhausted":
            return self.pkg.Response(
                502,
                headers={**served, "x-turnout-attempts": "3", "x-should-retry": "false"},
                json={"error": {"message": "no provider", "type": "upstream_error", "code": "provider_failed"}},
            )
        if model == "limited":
            return self.pkg.Response(
                429,
                headers={**served, "x-turnout-attempts": "2", "x-should-retry": "false", "retry-after": "9"},
                json={"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}},
            )
        if model in ("open", "queue-full"):  # refused before any attempt: no x-turnout-attempts
            code = "circuit_open" if model == "open" else "queue_full"
            return self.pkg.Response(
                503,
                headers={"x-request-id": "r0", "retry-after": "5", "x-should-retry": "false"},
                json={"error": {"message": "later", "type": "service_unavailable", "code": code}},
            )
        if model == "upstream-500":  # `fallback.on_exhausted: last`: the last attempt's own status
            return self.pkg.Response(
                500,
                headers={
                    **served,
                    "x-turnout-attempts": "2",
                    "x-should-retry": "false",
                    "x-turnout-exhausted-answer": "last",
                },
                json={"error": {"message": "upstream broke", "type": "server_error", "code": None}},
            )
        if model == "bad":
            return self.pkg.Response(
                400,
                headers={**served, "x-should-retry": "false"},
                json={"error": {"message": "bad", "type": "invalid_request_error"}},
            )
        if model == "once-500" and self.failures_left:
            self.failures_left -= 1
            return self.pkg.Response(
                500,
                headers={"x-should-retry": "true", "retry-after-ms": "1"},
                json={"error": {"message": "lost", "type": "server_error"}},
            )
        if request.url.path.endswith("/messages"):
            return self.pkg.Response(
                200,
                headers=served,
                json={
                    "id": "m1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": f"from {model}"}],
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 2},
                },
            )
        return self.pkg.Response(200, headers=served, json=_completion(model))


def _openai(pkg: ModuleType, gateway: MockGateway, events: list[GatewayRouting], **options: Any) -> openai.OpenAI:
    http = gateway_http_client(on_routing=events.append, http=pkg, transport=pkg.MockTransport(gateway), **options)
    return openai.OpenAI(base_url="http://gw/v1", api_key="tk-x", http_client=http, max_retries=2)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_answer_becomes_an_event_on_the_callback_and_the_raw_response(name: str) -> None:
    pkg = importlib.import_module(name)
    events: list[GatewayRouting] = []
    client = _openai(pkg, MockGateway(pkg), events)
    raw = client.chat.completions.with_raw_response.create(model="ok", messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "from ok"
    [event] = events
    assert (event.provider, event.model, event.attempts, event.request_id) == ("p1", "ok-v1", 1, "r1")
    assert routing_of(raw) is event


@pytest.mark.parametrize("name", PACKAGES)
def test_a_retry_by_the_sdk_reuses_the_calls_idempotency_key(name: str) -> None:
    pkg = importlib.import_module(name)
    gateway = MockGateway(pkg)
    client = _openai(pkg, gateway, [])
    client.chat.completions.create(model="once-500", messages=MESSAGES)  # type: ignore[arg-type]
    client.chat.completions.create(model="once-500", messages=MESSAGES)  # type: ignore[arg-type]
    [(_, first, c0), (_, retry, c1), (_, second_call, c2)] = gateway.seen
    assert (c0, c1, c2) == ("0", "1", "0")
    assert first and retry == first, "the SDK's retry carried another key"
    assert second_call and second_call != first, "a new logical call reused the previous key"


@pytest.mark.parametrize("name", PACKAGES)
def test_a_callers_own_idempotency_key_is_kept(name: str) -> None:
    pkg = importlib.import_module(name)
    gateway = MockGateway(pkg)
    _openai(pkg, gateway, []).chat.completions.create(
        model="ok",
        messages=MESSAGES,  # type: ignore[arg-type]
        extra_headers={"Idempotency-Key": "mine"},
    )
    assert gateway.seen == [("ok", "mine", "0")]


@pytest.mark.parametrize("name", PACKAGES)
@pytest.mark.parametrize("exhausted", ["exhausted", "limited", "upstream-500"])
def test_an_exhausted_chain_moves_to_the_next_model_once(name: str, exhausted: str) -> None:
    pkg = importlib.import_module(name)
    gateway = MockGateway(pkg)
    events: list[GatewayRouting] = []
    client = _openai(pkg, gateway, events, model_chain={exhausted: ["exhausted", "ok", "never"]})
    raw = client.chat.completions.with_raw_response.create(model=exhausted, messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "from ok"
    models = [m for m, _, _ in gateway.seen]
    assert models == ([exhausted, "ok"] if exhausted == "exhausted" else [exhausted, "exhausted", "ok"])
    keys = [k for _, k, _ in gateway.seen]
    assert keys[1:] == [f"{keys[0]}.{i}" for i in range(1, len(keys))]  # one key per model: no 409 on the body change
    assert [e.chain_index for e in events] == list(range(len(models)))
    assert events[0].chain_exhausted and not events[-1].chain_exhausted
    assert routing_of(raw) == events[-1] and events[-1].requested_model == "ok"


@pytest.mark.parametrize("name", PACKAGES)
def test_when_every_model_is_exhausted_the_caller_gets_the_original_error_and_no_sdk_retry(name: str) -> None:
    pkg = importlib.import_module(name)
    gateway = MockGateway(pkg)
    client = _openai(pkg, gateway, [], model_chain=["exhausted"])
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="limited", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.response.headers["retry-after"] == "9"  # the original error, its hints intact
    assert [m for m, _, _ in gateway.seen] == ["limited", "exhausted"]  # x-should-retry: false: no second round


@pytest.mark.parametrize("name", PACKAGES)
def test_every_target_out_of_rotation_moves_down_the_chain(name: str) -> None:
    pkg = importlib.import_module(name)
    gateway = MockGateway(pkg)
    events: list[GatewayRouting] = []
    completion = _openai(pkg, gateway, events, model_chain=["ok"]).chat.completions.create(
        model="open",
        messages=MESSAGES,  # type: ignore[arg-type]
    )
    assert completion.choices[0].message.content == "from ok"
    assert (events[0].error_code, events[0].attempts, events[0].chain_exhausted) == ("circuit_open", None, True)


@pytest.mark.parametrize("name", PACKAGES)
@pytest.mark.parametrize(
    ("model", "error"), [("bad", openai.BadRequestError), ("queue-full", openai.InternalServerError)]
)
def test_a_terminal_error_or_an_overloaded_gateway_never_moves_down_the_chain(
    name: str, model: str, error: type[Exception]
) -> None:
    pkg = importlib.import_module(name)
    gateway = MockGateway(pkg)
    with pytest.raises(error):
        _openai(pkg, gateway, [], model_chain=["ok"]).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    assert [m for m, _, _ in gateway.seen] == [model]


@pytest.mark.parametrize("name", PACKAGES)
def test_a_failing_callback_never_fails_the_request(name: str) -> None:
    pkg = importlib.import_module(name)

    def broken(event: GatewayRouting) -> None:
        raise RuntimeError("boom")

    events: list[GatewayRouting] = []
    http = gateway_http_client(
        on_routing=[broken, events.append], http=pkg, transport=pkg.MockTransport(MockGateway(pkg))
    )
    client = openai.OpenAI(base_url="http://gw/v1", api_key="tk-x", http_client=http)
    assert client.chat.completions.create(model="ok", messages=MESSAGES).id == "c1"  # type: ignore[arg-type]
    assert len(events) == 1


def test_the_anthropic_sdk_gets_events_and_the_chain_too() -> None:
    pkg = importlib.import_module("httpx2" if "httpx2" in PACKAGES else "httpx")
    gateway = MockGateway(pkg)
    events: list[GatewayRouting] = []
    http = gateway_http_client(
        on_routing=events.append, http=pkg, transport=pkg.MockTransport(gateway), model_chain={"exhausted": ["ok"]}
    )
    client = anthropic.Anthropic(base_url="http://gw", api_key="tk-x", http_client=http)
    message = client.messages.create(model="exhausted", max_tokens=5, messages=MESSAGES)  # type: ignore[arg-type]
    assert message.content[0].text == "from ok"  # type: ignore[union-attr]
    assert [(e.chain_index, e.requested_model) for e in events] == [(0, "exhausted"), (1, "ok")]


async def test_async_clients_keep_one_key_per_task() -> None:
    pkg = importlib.import_module(PACKAGES[-1])
    gateway = MockGateway(pkg)
    gateway.failures_left = 2
    counter = iter(range(100))
    http = async_gateway_http_client(
        http=pkg, transport=pkg.MockTransport(gateway), idempotency=IdempotencyKeys(lambda: f"k{next(counter)}")
    )
    client = openai.AsyncOpenAI(base_url="http://gw/v1", api_key="tk-x", http_client=http, max_retries=2)
    await asyncio.gather(
        *(
            client.chat.completions.create(model="once-500", messages=MESSAGES)  # type: ignore[arg-type]
            for _ in range(3)
        )
    )
    by_key: dict[str | None, list[str | None]] = {}
    for _, key, count in gateway.seen:
        by_key.setdefault(key, []).append(count)
    assert len(by_key) == 3, "each concurrent call has its own key"
    assert sorted(sorted(c for c in counts if c is not None) for counts in by_key.values()) == [
        ["0"],
        ["0", "1"],
        ["0", "1"],
    ]
