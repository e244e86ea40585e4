"""Real-HTTP tests of the simulator's SSE framing and mid-stream faults."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}], "stream": True}


def parse_sse(raw: bytes) -> list[str]:
    """Split an SSE body into `data:` payloads, asserting exact framing.

    Every event must be one `data: ...` line followed by a blank line.
    """
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), text[-80:]
    payloads = []
    for event in text[:-2].split("\n\n"):
        assert event.startswith("data: ") and "\n" not in event, event
        payloads.append(event[len("data: ") :])
    return payloads


async def read_stream(client: httpx.AsyncClient, model: str, **fields: Any) -> tuple[httpx.Response, bytes]:
    """Stream one request, returning the response and every byte received."""
    async with client.stream("POST", "/v1/chat/completions", json=BODY | {"model": model} | fields) as resp:
        return resp, await resp.aread()


async def read_until_error(client: httpx.AsyncClient, model: str, timeout: float = 5.0) -> tuple[bytes, Exception]:
    """Stream until the transport fails; return the bytes before it and the error."""
    received = bytearray()
    body = BODY | {"model": model}
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body, timeout=timeout) as resp:
            assert resp.status_code == 200
            async for piece in resp.aiter_raw():
                received += piece
    except httpx.TransportError as exc:
        return bytes(received), exc
    raise AssertionError("stream ended without a transport error")


def content_of(payloads: list[str]) -> list[str]:
    """The content deltas, in order (role and finish chunks excluded)."""
    out = []
    for payload in payloads:
        if payload == "[DONE]":
            continue
        obj = json.loads(payload)
        for choice in obj["choices"]:
            if "content" in choice["delta"] and "role" not in choice["delta"]:
                out.append(choice["delta"]["content"])
    return out


async def test_stream_success_framing_exact(client: httpx.AsyncClient) -> None:
    resp, raw = await read_stream(client, "gpt-4o", max_tokens=4)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    payloads = parse_sse(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert len(chunks) == 1 + 4 + 1  # role, 4 tokens, finish
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")
    for c in chunks:
        assert c["object"] == "chat.completion.chunk" and c["model"] == "gpt-4o"
        assert isinstance(c["created"], int) and len(c["choices"]) == 1 and "usage" not in c
    first = chunks[0]["choices"][0]
    assert first["delta"]["role"] == "assistant" and first["delta"]["content"] == ""
    assert first["finish_reason"] is None and first["index"] == 0
    assert [c["choices"][0]["delta"] for c in chunks[1:5]] == [
        {"content": "tok0"},
        {"content": " tok1"},
        {"content": " tok2"},
        {"content": " tok3"},
    ]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:5])
    assert chunks[5]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }


async def test_stream_default_length_and_include_usage(
    client: httpx.AsyncClient,
) -> None:
    _, raw = await read_stream(client, "m", stream_options={"include_usage": True})
    payloads = parse_sse(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert "".join(content_of(payloads)) == " ".join(f"tok{i}" for i in range(12))
    *body_chunks, usage_chunk = chunks
    assert all(c["usage"] is None for c in body_chunks)
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {
        "prompt_tokens": 1,
        "completion_tokens": 12,
        "total_tokens": 13,
    }


async def test_stream_error_status_is_json_not_sse(client: httpx.AsyncClient) -> None:
    resp, raw = await read_stream(client, "se~503")
    assert resp.status_code == 503
    assert json.loads(raw)["error"]["type"] == "server_error"


@pytest.mark.parametrize(
    ("step", "code"),
    [("bodyerr", None), ("bodyerr429", "rate_limit_exceeded")],
    ids=["bodyerr", "bodyerr429"],
)
async def test_stream_body_error_first_event(client: httpx.AsyncClient, step: str, code: object) -> None:
    resp, raw = await read_stream(client, f"sbe~{step}")
    assert resp.status_code == 200
    payloads = parse_sse(raw)
    first = json.loads(payloads[0])
    assert list(first) == ["error"] and first["error"]["code"] == code
    assert "[DONE]" not in payloads


async def test_cut_stream_sends_n_chunks_then_drops(client: httpx.AsyncClient) -> None:
    raw, exc = await read_until_error(client, "cs~cut3")
    assert isinstance(exc, httpx.RemoteProtocolError)
    payloads = parse_sse(raw)
    assert content_of(payloads) == ["tok0", " tok1", " tok2"]
    assert "[DONE]" not in payloads


async def test_stall_stream_sends_n_chunks_then_goes_quiet(
    client: httpx.AsyncClient,
) -> None:
    raw, exc = await read_until_error(client, "ss~stall2", timeout=0.25)
    assert isinstance(exc, httpx.ReadTimeout)
    assert content_of(parse_sse(raw)) == ["tok0", " tok1"]


async def test_badchunk_stream_has_one_malformed_event(
    client: httpx.AsyncClient,
) -> None:
    _, raw = await read_stream(client, "bc~badchunk2", max_tokens=4)
    payloads = parse_sse(raw)
    assert payloads[-1] == "[DONE]"
    bad = []
    for index, payload in enumerate(payloads[:-1]):
        try:
            json.loads(payload)
        except ValueError:
            bad.append(index)
    assert bad == [2]  # role chunk is 0, first content event 1, second content event 2
    assert payloads[2].startswith('{"choices": [')
    good = payloads[:2] + payloads[3:]
    assert content_of(good) == ["tok0", " tok2", " tok3"]
    assert json.loads(payloads[-2])["choices"][0]["finish_reason"] == "stop"


async def test_nodone_stream_finishes_without_done(client: httpx.AsyncClient) -> None:
    resp, raw = await read_stream(client, "nd~nodone", max_tokens=3)
    assert resp.headers.get("connection") == "close"
    payloads = parse_sse(raw)
    assert "[DONE]" not in payloads
    assert json.loads(payloads[-1])["choices"][0]["finish_reason"] == "stop"
    assert content_of(payloads) == ["tok0", " tok1", " tok2"]


async def test_slow_stream_delays_first_content_chunk(
    client: httpx.AsyncClient,
) -> None:
    started = time.monotonic()
    arrivals: list[tuple[float, bytes]] = []
    async with client.stream(
        "POST",
        "/v1/chat/completions",
        json=BODY | {"model": "sw~slow300", "max_tokens": 2},
    ) as resp:
        head_s = time.monotonic() - started
        async for line in resp.aiter_lines():
            if line:
                arrivals.append((time.monotonic() - started, line.encode()))
    first_content_s = next(t for t, line in arrivals if b'"content":"tok0"' in line)
    # Lower bounds only: a loaded machine can make arrivals later, never earlier.
    assert first_content_s >= 0.3 and first_content_s >= head_s
    assert arrivals[-1][1] == b"data: [DONE]"


async def test_interval_spaces_content_chunks(client: httpx.AsyncClient) -> None:
    started = time.monotonic()
    _, raw = await read_stream(client, "iv~200i50", max_tokens=4)
    assert time.monotonic() - started >= 0.12  # three gaps of 50 ms
    assert content_of(parse_sse(raw)) == ["tok0", " tok1", " tok2", " tok3"]


async def test_reset_and_close_on_stream_requests(client: httpx.AsyncClient) -> None:
    for model in ("sr~reset", "sc~close"):
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await read_stream(client, model)
    log = (await client.get("/sim/log")).json()
    assert [(e["step"], e["status"], e["stream"]) for e in log] == [
        ("reset", None, True),
        ("close", None, True),
    ]
