"""Real-HTTP tests of the simulator's Anthropic Messages API (`POST /v1/messages`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import pytest

HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
USER = [{"role": "user", "content": "say hi"}]


@pytest.fixture
async def sim(sim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url, timeout=5.0, headers=HEADERS) as client:
        yield client


async def _post(client: httpx.AsyncClient, model: str, **fields: Any) -> httpx.Response:
    return await client.post("/v1/messages", json={"model": model, "max_tokens": 5, "messages": USER, **fields})


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in raw.decode().strip().split("\n\n"):
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), block
        out.append((name[7:], json.loads(data[6:])))
    return out


async def _stream(client: httpx.AsyncClient, model: str, **fields: Any) -> tuple[httpx.Response, bytes]:
    body = {"model": model, "max_tokens": 3, "messages": USER, "stream": True, **fields}
    async with client.stream("POST", "/v1/messages", json=body) as resp:
        try:
            return resp, await resp.aread()
        except httpx.HTTPError:
            return resp, b""


async def test_message_is_deterministic_text_with_usage(sim: httpx.AsyncClient) -> None:
    resp = await _post(sim, "claude-x")
    assert resp.status_code == 200
    body = resp.json()
    assert body["type"] == "message" and body["id"].startswith("msg_") and body["model"] == "claude-x"
    assert body["content"] == [{"type": "text", "text": "tok0 tok1 tok2 tok3 tok4"}]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"] == {
        "input_tokens": 2,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


async def test_stream_is_the_anthropic_event_sequence(sim: httpx.AsyncClient) -> None:
    resp, raw = await _stream(sim, "claude-x")
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = _events(raw)
    assert [n for n, _ in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(n == d["type"] for n, d in events)
    assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == "tok0 tok1 tok2"
    assert events[-2][1]["usage"] == {"output_tokens": 3}


async def test_forced_tool_answers_a_tool_use(sim: httpx.AsyncClient) -> None:
    tools = [{"name": "weather", "input_schema": {"type": "object"}}]
    body = (await _post(sim, "claude-x", tools=tools, tool_choice={"type": "any"})).json()
    assert body["stop_reason"] == "tool_use"
    [block] = body["content"]
    assert block["type"] == "tool_use" and block["name"] == "weather"
    assert block["input"] == {"answer": "tok0 tok1 tok2 tok3 tok4"}


async def test_prefill_is_continued(sim: httpx.AsyncClient) -> None:
    messages = [*USER, {"role": "assistant", "content": [{"type": "text", "text": "tok0 tok1"}]}]
    body = (await _post(sim, "claude-x", messages=messages)).json()
    assert body["content"][0]["text"] == " tok2 tok3 tok4"
    assert body["usage"]["output_tokens"] == 3


@pytest.mark.parametrize(
    ("headers", "body", "status", "etype"),
    [
        ({"x-api-key": ""}, {"model": "m", "max_tokens": 5, "messages": USER}, 401, "authentication_error"),
        ({"anthropic-version": ""}, {"model": "m", "max_tokens": 5, "messages": USER}, 400, "invalid_request_error"),
        ({}, {"model": "m", "messages": USER}, 400, "invalid_request_error"),
        ({}, {"model": "m~ok~bad", "max_tokens": 5, "messages": USER}, 400, "invalid_request_error"),
    ],
    ids=["no_key", "no_version", "no_max_tokens", "bad_scenario"],
)
async def test_rejections_use_anthropic_error_bodies(
    sim: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any], status: int, etype: str
) -> None:
    resp = await sim.post("/v1/messages", json=body, headers=headers)
    assert resp.status_code == status
    assert resp.json()["type"] == "error" and resp.json()["error"]["type"] == etype


@pytest.mark.parametrize(
    ("step", "status", "etype"),
    [
        ("529", 529, "overloaded_error"),
        ("500", 500, "api_error"),
        ("429", 429, "rate_limit_error"),
        ("404", 404, "not_found_error"),
        ("413", 413, "request_too_large"),
        ("401", 401, "authentication_error"),
        ("403", 403, "permission_error"),
        ("quota", 400, "invalid_request_error"),
        ("ctx", 400, "invalid_request_error"),
    ],
)
async def test_status_steps_answer_anthropic_errors(sim: httpx.AsyncClient, step: str, status: int, etype: str) -> None:
    resp = await _post(sim, f"err~{step}")
    assert resp.status_code == status
    assert resp.json()["error"]["type"] == etype


async def test_429_retry_after_sends_anthropic_ratelimit_headers(sim: httpx.AsyncClient) -> None:
    resp = await _post(sim, "ra~429ra3")
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "3"
    assert resp.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert resp.headers["anthropic-ratelimit-requests-reset"].endswith("Z")


async def test_bodyerr_stream_starts_with_an_overloaded_error_event(sim: httpx.AsyncClient) -> None:
    resp, raw = await _stream(sim, "be~bodyerr")
    assert resp.status_code == 200
    assert _events(raw) == [
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    ]


async def test_bodyerr_without_stream_is_a_200_error_body(sim: httpx.AsyncClient) -> None:
    resp = await _post(sim, "be~bodyerr")
    assert resp.status_code == 200 and resp.json()["error"]["type"] == "overloaded_error"


async def test_nodone_stream_lacks_message_stop(sim: httpx.AsyncClient) -> None:
    _, raw = await _stream(sim, "nd~nodone")
    names = [n for n, _ in _events(raw)]
    assert names[-1] == "message_delta" and "message_stop" not in names


async def test_cut_stream_closes_after_n_deltas_and_logs_a_fault(sim: httpx.AsyncClient) -> None:
    _, raw = await _stream(sim, "c~cut2", max_tokens=10)
    assert raw.count(b"event: content_block_delta") <= 2 and b"message_stop" not in raw
    [entry] = (await sim.get("/sim/log", params={"model": "c~cut2"})).json()
    assert entry["end"] == "fault" and entry["step"] == "cut2" and entry["stream"] is True


async def test_attempts_share_the_sim_log_with_a_key_fingerprint(sim: httpx.AsyncClient) -> None:
    await _post(sim, "logged~529,200")
    await _post(sim, "logged~529,200")
    log = (await sim.get("/sim/log", params={"model": "logged~529,200"})).json()
    assert [(e["step"], e["status"]) for e in log] == [("529", 529), ("200", 200)]
    assert log[0]["auth_fingerprint"] is not None and log[0]["end"] == "complete"


async def test_official_anthropic_sdk_reads_the_simulator(sim_url: str) -> None:
    client = anthropic.AsyncAnthropic(base_url=sim_url, api_key="sk-ant-test", max_retries=0)
    try:
        message = await client.messages.create(model="claude-x", max_tokens=4, messages=USER)  # type: ignore[arg-type]
        assert message.content[0].text == "tok0 tok1 tok2 tok3"  # type: ignore[union-attr]
        async with client.messages.stream(model="claude-x", max_tokens=3, messages=USER) as stream:  # type: ignore[arg-type]
            assert "".join([t async for t in stream.text_stream]) == "tok0 tok1 tok2"
        with pytest.raises(anthropic.APIStatusError) as caught:
            await client.messages.create(model="o~529", max_tokens=4, messages=USER)  # type: ignore[arg-type]
        assert caught.value.status_code == 529
    finally:
        await client.close()
