"""`ended_s` / `end` in `GET /sim/log`: complete, client_gone and fault."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from aiohttp import web

from turnout_sim import openai_handler
from turnout_sim.app import STATE, start_in_background
from turnout_sim.attempt_log import End

CLIENT_GONE_WITHIN_S = 1.0
"""How soon after the client leaves the log must say `client_gone`."""


async def post_raw(client: httpx.AsyncClient, model: str, stream: bool, **fields: Any) -> httpx.Response | Exception:
    """Post and read everything; a transport error is returned, not raised."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    try:
        async with client.stream(
            "POST",
            "/v1/chat/completions",
            json=body | {"stream": stream} | fields,
            timeout=2.0,
        ) as resp:
            await resp.aread()
            return resp
    except httpx.TransportError as exc:
        return exc


async def only_entry(client: httpx.AsyncClient) -> dict[str, Any]:
    [entry] = (await client.get("/sim/log")).json()
    return entry  # type: ignore[no-any-return]


async def wait_for_end(
    client: httpx.AsyncClient, within_s: float = CLIENT_GONE_WITHIN_S
) -> tuple[dict[str, Any], float]:
    """Poll the log until its only entry has an `end`; also return the wait (s)."""
    started = time.monotonic()
    while True:
        entry = await only_entry(client)
        waited = time.monotonic() - started
        if entry["end"] is not None or waited > within_s:
            return entry, waited
        await asyncio.sleep(0.01)


# (model, stream, max_tokens, expected status)
COMPLETE = [
    ("c~200", False, 3, 200),
    ("c~200", True, 3, 200),
    ("c~200i10", True, 3, 200),
    ("c~503", False, 3, 503),
    ("c~503", True, 3, 503),
    ("c~429ra1", False, 3, 429),
    ("c~slow50", False, 3, 200),
    ("c~slow50", True, 3, 200),
    ("c~badchunk1", False, 3, 200),
    ("c~badchunk2", True, 3, 200),
    ("c~nodone", True, 3, 200),
    ("c~bodyerr", False, 3, 200),
    ("c~bodyerr", True, 3, 200),
    ("c~down5s", False, 3, 503),
    ("c~noprefill", False, 3, 200),
    ("c~200+50ms", False, 3, 200),
]


@pytest.mark.parametrize(
    ("model", "stream", "max_tokens", "status"),
    COMPLETE,
    ids=[f"{m[0].partition('~')[2]}-{'sse' if m[1] else 'json'}" for m in COMPLETE],
)
async def test_complete_responses_end_complete(
    client: httpx.AsyncClient, model: str, stream: bool, max_tokens: int, status: int
) -> None:
    before = time.time()
    result = await post_raw(client, model, stream, max_tokens=max_tokens)
    after = time.time()
    assert isinstance(result, httpx.Response) and result.status_code == status
    entry = await only_entry(client)
    assert (entry["status"], entry["end"]) == (status, "complete")
    assert before - 1 <= entry["t_s"] <= entry["ended_s"] <= after + 1


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        (b'{"model": "m", "messages": []}', {"Authorization": ""}, 401),
        (b"{not json", {}, 400),
        (b'{"model": "m~teapot", "messages": []}', {}, 400),
    ],
    ids=["no-auth", "bad-json", "bad-scenario"],
)
async def test_rejected_requests_end_complete(
    client: httpx.AsyncClient, content: bytes, headers: dict[str, str], status: int
) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        content=content,
        headers={"content-type": "application/json"} | headers,
    )
    assert resp.status_code == status
    entry = await only_entry(client)
    assert (entry["status"], entry["end"]) == (status, "complete")
    assert entry["ended_s"] >= entry["t_s"]


# (model, stream, expected status in the log)
FAULTS = [
    ("f~reset", False, None),
    ("f~reset", True, None),
    ("f~close", False, None),
    ("f~close", True, None),
    ("f~cut1", False, 200),
    ("f~cut2", True, 200),
    ("f~cut0", True, 200),
    ("f~cut1i20", True, 200),
    ("f~reset+30ms", False, None),
]


@pytest.mark.parametrize(
    ("model", "stream", "status"),
    FAULTS,
    ids=[f"{m[0].partition('~')[2]}-{'sse' if m[1] else 'json'}" for m in FAULTS],
)
async def test_socket_and_mid_body_faults_end_fault(
    client: httpx.AsyncClient, model: str, stream: bool, status: int | None
) -> None:
    before = time.time()
    result = await post_raw(client, model, stream, max_tokens=5)
    after = time.time()
    assert isinstance(result, httpx.TransportError)
    entry = await only_entry(client)
    assert (entry["status"], entry["end"]) == (status, "fault")
    assert before - 1 <= entry["t_s"] <= entry["ended_s"] <= after + 1


async def test_client_leaving_mid_stream_is_client_gone_within_1s(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler_returned: list[float] = []
    real_answer = openai_handler.answer

    async def answer(*args: Any, **kwargs: Any) -> web.StreamResponse:
        try:
            return await real_answer(*args, **kwargs)
        finally:
            handler_returned.append(time.time())

    monkeypatch.setattr(openai_handler, "answer", answer)
    body = {
        "model": "gone~200i100",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": 50,
    }
    received = 0
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if '"content":" tok' in line:
                received += 1
                if received == 3:
                    break
        open_entry = await only_entry(client)
        assert (open_entry["end"], open_entry["ended_s"]) == (None, None)
        left_s = time.time()
    # leaving the block closes the connection: the body was not read to the end
    entry, waited = await wait_for_end(client)
    assert entry["end"] == "client_gone", entry
    assert waited < CLIENT_GONE_WITHIN_S
    assert left_s - 0.05 <= entry["ended_s"] <= left_s + CLIENT_GONE_WITHIN_S
    assert entry["status"] == 200
    # the handler stopped within one interval (100 ms) of noticing, not after
    # streaming the remaining ~47 chunks (4.7 s)
    deadline = time.monotonic() + CLIENT_GONE_WITHIN_S
    while not handler_returned and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    [returned_s] = handler_returned
    assert returned_s - left_s < 1.0  # about one interval (100 ms), far from the 4.7 s of a full stream
    assert await only_entry(client) == entry


@pytest.mark.parametrize(
    ("model", "stream"),
    [
        ("held~hang", False),
        ("held~hang", True),
        ("held~stall1", False),
        ("held~stall2", True),
        ("held~stall1i1000", True),
        ("held~slow5000", True),
        ("held~slow5000", False),
        ("held~200+5000ms", False),
        ("held~200i5000", True),
    ],
    ids=[
        "hang-json",
        "hang-sse",
        "stall-json",
        "stall-sse",
        "stall-interval-sse",
        "slow-sse",
        "slow-json",
        "latency",
        "long-interval-sse",
    ],
)
async def test_client_timeout_on_held_connection_is_client_gone(
    client: httpx.AsyncClient, model: str, stream: bool
) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        "max_tokens": 4,
    }
    with pytest.raises(httpx.ReadTimeout):
        async with client.stream("POST", "/v1/chat/completions", json=body, timeout=0.3) as resp:
            await resp.aread()
    left_s = time.time()
    entry, waited = await wait_for_end(client)
    assert entry["end"] == "client_gone", entry
    assert waited < CLIENT_GONE_WITHIN_S
    assert entry["ended_s"] <= left_s + CLIENT_GONE_WITHIN_S
    if model.endswith("+5000ms"):
        assert entry["status"] is None  # left before anything was sent


async def test_open_connection_has_null_end_and_shutdown_ends_it_as_fault() -> None:
    runner, url = await start_in_background("127.0.0.1", 0)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer k"}) as c:
        body = {"model": "sd~stall1", "messages": [], "stream": True}
        task = asyncio.create_task(c.post("/v1/chat/completions", json=body, timeout=10))
        while not (log := (await c.get("/sim/log")).json()) or log[0]["status"] is None:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        [entry] = (await c.get("/sim/log")).json()
        assert (entry["status"], entry["end"], entry["ended_s"]) == (200, None, None)
        await runner.cleanup()
        with pytest.raises(httpx.TransportError):
            await task
    [attempt] = runner.app[STATE].log.entries()
    assert attempt.end is End.FAULT and attempt.ended_s is not None
