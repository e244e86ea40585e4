"""Assistant prefill continuation and the `noprefill` step (pure and real HTTP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from turnout_sim import chat_answer
from turnout_sim import openai_wire as wire


def full(n: int) -> str:
    """The full deterministic answer of n tokens; also the first n words."""
    return " ".join(f"tok{i}" for i in range(n))


def parse_sse(raw: bytes) -> list[str]:
    """The `data:` payloads of an SSE body (one line per event)."""
    text = raw.decode("utf-8")
    assert not text or text.endswith("\n\n"), text[-80:]
    return [event.removeprefix("data: ") for event in text.split("\n\n") if event]


def content_of(payloads: list[str]) -> list[str]:
    """The content deltas, in order (role, finish and malformed events excluded)."""
    out = []
    for payload in payloads:
        if payload == "[DONE]":
            continue
        for choice in json.loads(payload)["choices"]:
            if "content" in choice["delta"] and "role" not in choice["delta"]:
                out.append(choice["delta"]["content"])
    return out


# ------------------------------------------------------------------ pure


# (prefill, N, expected K or None)
MATCHES = [
    ("tok0 tok1 tok2", 10, 3),
    ("tok0 tok1 tok2 ", 10, 3),  # one trailing space allowed
    ("tok0", 10, 1),
    ("", 10, 0),  # K = 0
    (" ", 10, 0),  # K = 0 plus the trailing space: same answer as no match
    (full(10), 10, 10),  # K = N
    (full(10) + " ", 10, 10),
    ("tok0 tok1 tok2", 2, None),  # more words than the answer has
    ("tok1 tok2", 10, None),  # does not start at tok0
    ("tok0 tok2", 10, None),  # skips a word
    ("tok0  tok1", 10, None),  # double space
    ("tok0 tok1  ", 10, None),  # two trailing spaces
    (" tok0", 10, None),  # leading space
    ("tok0\ttok1", 10, None),
    ("tok0 tok1\n", 10, None),
    ("Tok0", 10, None),
    ("tok00", 10, None),
    ("Sure, here is", 10, None),
]


@pytest.mark.parametrize(
    ("prefill", "count", "expected"),
    MATCHES,
    ids=[f"{m[0]!r}-N{m[1]}" for m in MATCHES],
)
def test_prefill_match(prefill: str, count: int, expected: int | None) -> None:
    assert wire.prefill_match(prefill, count) == expected


def chat(messages: list[dict[str, Any]], max_tokens: int = 10) -> wire.ChatRequest:
    return wire.parse_request({"model": "m", "messages": messages, "max_tokens": max_tokens})


USER = {"role": "user", "content": "say hi"}


@pytest.mark.parametrize(
    ("messages", "prefill"),
    [
        ([USER, {"role": "assistant", "content": "tok0 tok1"}], "tok0 tok1"),
        ([USER, {"role": "assistant", "content": ""}], ""),
        ([USER, {"role": "assistant", "content": "anything"}], "anything"),
        ([USER], None),
        ([], None),
        ([{"role": "assistant", "content": "tok0"}, USER], None),  # not last
        (
            [USER, {"role": "assistant", "content": [{"type": "text", "text": "x"}]}],
            None,
        ),
        ([USER, {"role": "assistant", "content": None, "tool_calls": []}], None),
        ([USER, "not an object"], None),
    ],
    ids=[
        "matching",
        "empty",
        "non-matching",
        "user-last",
        "no-messages",
        "assistant-not-last",
        "content-parts",
        "content-null",
        "junk-message",
    ],
)
def test_parse_request_reads_prefill(messages: list[dict[str, Any]], prefill: str | None) -> None:
    assert chat(messages).prefill == prefill


# (prefill, N, pieces, produced tokens)
PIECES = [
    (None, 4, ["tok0", " tok1", " tok2", " tok3"], 4),
    ("tok0 tok1", 4, [" tok2", " tok3"], 2),
    ("tok0 tok1 ", 4, ["tok2", " tok3"], 2),
    ("", 4, ["tok0", " tok1", " tok2", " tok3"], 4),
    ("nope", 4, ["tok0", " tok1", " tok2", " tok3"], 4),
    (full(4), 4, [], 0),
    (full(4) + " ", 4, [], 0),
]


@pytest.mark.parametrize(
    ("prefill", "count", "pieces", "produced"),
    PIECES,
    ids=["none", "k2", "k2-space", "k0", "no-match", "kN", "kN-space"],
)
def test_answer_pieces_continue_the_prefill(prefill: str | None, count: int, pieces: list[str], produced: int) -> None:
    messages: list[dict[str, Any]] = [USER]
    if prefill is not None:
        messages.append({"role": "assistant", "content": prefill})
    req = chat(messages, max_tokens=count)
    assert wire.answer_pieces(req) == pieces
    assert wire.produced_tokens(req) == produced
    assert wire.usage(req)["completion_tokens"] == produced
    if prefill is not None and req.prefill_words is not None and pieces:
        assert prefill + "".join(pieces) == full(count)
    body = chat_answer.completion(req, completion_id="c", created_s=0)
    assert body["choices"][0]["message"]["content"] == "".join(pieces)
    assert body["usage"]["total_tokens"] == req.prompt_tokens + produced


# ------------------------------------------------------------------ HTTP


def with_prefill(prefill: str | None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "say hi"}]
    if prefill is not None:
        messages.append({"role": "assistant", "content": prefill})
    return messages


async def post_chat(
    client: httpx.AsyncClient,
    model: str,
    prefill: str | None,
    **fields: Any,
) -> httpx.Response:
    body = {"model": model, "messages": with_prefill(prefill)} | fields
    return await client.post("/v1/chat/completions", json=body)


# (prefill, N, expected content, expected completion_tokens)
JSON_CASES = [
    ("tok0 tok1 tok2", 10, " " + " ".join(f"tok{i}" for i in range(3, 10)), 7),
    ("tok0 tok1 tok2 ", 10, " ".join(f"tok{i}" for i in range(3, 10)), 7),
    ("Sure! tok0", 10, full(10), 10),
    ("tok0 tok1 tok2", 2, full(2), 2),  # K > N: not a continuation
    ("", 10, full(10), 10),
    (full(10), 10, "", 0),
    (None, 10, full(10), 10),
]


@pytest.mark.parametrize(
    ("prefill", "count", "content", "produced"),
    JSON_CASES,
    ids=["k3", "k3-trailing-space", "non-matching", "k-over-n", "k0", "kN", "none"],
)
async def test_json_prefill_continuation(
    client: httpx.AsyncClient,
    prefill: str | None,
    count: int,
    content: str,
    produced: int,
) -> None:
    resp = await post_chat(client, "pf", prefill, max_tokens=count)
    assert resp.status_code == 200
    body = resp.json()
    assert body["choices"][0]["message"]["content"] == content
    assert body["choices"][0]["finish_reason"] == "stop"
    prompt = 2 + len((prefill or "").split())
    assert body["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": produced,
        "total_tokens": prompt + produced,
    }
    if prefill is not None and wire.prefill_match(prefill, count) is not None:
        assert prefill + content in (full(count), full(count) + " ")


async def stream_payloads(client: httpx.AsyncClient, model: str, prefill: str | None, **fields: Any) -> list[str]:
    body = {"model": model, "messages": with_prefill(prefill), "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=body | fields) as resp:
        assert resp.status_code == 200
        return parse_sse(await resp.aread())


# (prefill, N, content chunks)
SSE_CASES = [
    ("tok0 tok1 tok2", 6, [" tok3", " tok4", " tok5"]),
    ("tok0 tok1 tok2 ", 6, ["tok3", " tok4", " tok5"]),
    ("tok0 tok2", 3, ["tok0", " tok1", " tok2"]),
    ("", 3, ["tok0", " tok1", " tok2"]),
    (full(3), 3, []),
]


@pytest.mark.parametrize(
    ("prefill", "count", "chunks"),
    SSE_CASES,
    ids=["k3", "k3-trailing-space", "non-matching", "k0", "kN"],
)
async def test_sse_prefill_continuation_chunks(
    client: httpx.AsyncClient, prefill: str, count: int, chunks: list[str]
) -> None:
    payloads = await stream_payloads(
        client,
        "pfs",
        prefill,
        max_tokens=count,
        stream_options={"include_usage": True},
    )
    assert payloads[-1] == "[DONE]"
    objs = [json.loads(p) for p in payloads[:-1]]
    assert objs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert content_of(payloads) == chunks
    assert objs[-2]["choices"][0]["finish_reason"] == "stop"
    assert objs[-1]["choices"] == []
    assert objs[-1]["usage"]["completion_tokens"] == len(chunks)
    assert len(objs) == 1 + len(chunks) + 2  # role, content, finish, usage


@pytest.mark.parametrize(
    ("step", "chunks"),
    [
        ("cut2", [" tok3", " tok4"]),
        ("cut0", []),
        ("stall1", [" tok3"]),
    ],
    ids=["cut2", "cut0", "stall1"],
)
async def test_cut_and_stall_count_continuation_chunks(client: httpx.AsyncClient, step: str, chunks: list[str]) -> None:
    received = bytearray()
    body = {
        "model": f"pff~{step}",
        "messages": with_prefill("tok0 tok1 tok2"),
        "stream": True,
        "max_tokens": 10,
    }
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadTimeout)):
        async with client.stream("POST", "/v1/chat/completions", json=body, timeout=0.3) as resp:
            async for piece in resp.aiter_raw():
                received += piece
    assert content_of(parse_sse(bytes(received))) == chunks


async def test_badchunk_counts_continuation_chunks(client: httpx.AsyncClient) -> None:
    payloads = await stream_payloads(client, "pfb~badchunk2", "tok0 tok1 tok2", max_tokens=6)
    bad = []
    for index, payload in enumerate(payloads[:-1]):
        try:
            json.loads(payload)
        except ValueError:
            bad.append(index)
    assert bad == [2]  # role 0, " tok3" 1, the second continuation chunk 2
    good = payloads[:2] + payloads[3:]
    assert content_of(good) == [" tok3", " tok5"]


# ------------------------------------------------------------------ noprefill


@pytest.mark.parametrize(
    "prefill",
    ["tok0 tok1", "", "not a continuation"],
    ids=["matching", "empty", "non-matching"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_noprefill_rejects_any_prefill(client: httpx.AsyncClient, prefill: str, stream: bool) -> None:
    resp = await post_chat(client, "np~noprefill", prefill, stream=stream)
    assert resp.status_code == 400
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert list(body) == ["error"]
    error = body["error"]
    assert list(error) == ["message", "type", "param", "code"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "messages" and error["code"] == "unsupported_value"
    assert "assistant prefill is not supported for this model" in (error["message"].lower())
    [entry] = (await client.get("/sim/log")).json()
    assert (entry["step"], entry["status"], entry["end"]) == (
        "noprefill",
        400,
        "complete",
    )


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "hi"}],
        [
            {"role": "assistant", "content": "tok0"},
            {"role": "user", "content": "hi"},
        ],
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "tok0"}]},
        ],
    ],
    ids=["user-last", "assistant-earlier", "assistant-content-parts"],
)
async def test_noprefill_without_prefill_is_200(client: httpx.AsyncClient, messages: list[dict[str, Any]]) -> None:
    body = {"model": "np2~noprefill", "messages": messages, "max_tokens": 3}
    resp = await client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200
    assert resp.json()["choices"][0]["message"]["content"] == "tok0 tok1 tok2"


async def test_noprefill_streams_like_200_with_interval(
    client: httpx.AsyncClient,
) -> None:
    payloads = await stream_payloads(client, "np3~noprefilli10", None, max_tokens=3)
    assert payloads[-1] == "[DONE]"
    assert content_of(payloads) == ["tok0", " tok1", " tok2"]


async def test_noprefill_then_200_continues_the_prefill(
    client: httpx.AsyncClient,
) -> None:
    first = await post_chat(client, "np4~noprefill,200", "tok0 tok1", max_tokens=4)
    second = await post_chat(client, "np4~noprefill,200", "tok0 tok1", max_tokens=4)
    assert first.status_code == 400
    assert second.status_code == 200
    assert second.json()["choices"][0]["message"]["content"] == " tok2 tok3"


@pytest.fixture
async def sdk(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=5.0)
    try:
        yield client
    finally:
        await client.close()


async def test_sdk_sees_continuation_and_prefill_error(
    sdk: openai.AsyncOpenAI,
) -> None:
    result = await sdk.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "user", "content": "count"},
            {"role": "assistant", "content": "tok0 tok1"},
        ],
        max_tokens=4,
    )
    assert result.choices[0].message.content == " tok2 tok3"
    assert result.usage is not None and result.usage.completion_tokens == 2
    with pytest.raises(openai.BadRequestError) as info:
        await sdk.chat.completions.create(
            model="x~noprefill",
            messages=[
                {"role": "user", "content": "count"},
                {"role": "assistant", "content": "tok0"},
            ],
        )
    assert "prefill is not supported for this model" in info.value.message
