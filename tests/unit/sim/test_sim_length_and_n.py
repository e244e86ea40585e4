"""The simulator's truncation (`len<N>` cut by `max_tokens`) and `n` choices, on both wires."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx
import pytest

from turnout_sim import openai_wire as wire
from turnout_sim.scenarios import StepKind, parse_step

Post = Callable[..., Coroutine[Any, Any, httpx.Response]]
ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
USER = [{"role": "user", "content": "say hi"}]


def _text(count: int, choice: int = 0) -> str:
    return "".join(wire.tokens(count, choice))


def _sse_objects(raw: bytes) -> list[dict[str, Any]]:
    payloads = [event.removeprefix("data: ") for event in raw.decode().strip().split("\n\n")]
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


# ------------------------------------------------------------------ the step


def test_len_step_parses_with_its_answer_length() -> None:
    step = parse_step("len20i5+10ms")
    assert (step.kind, step.answer_tokens, step.status) == (StepKind.LENGTH, 20, 200)
    assert (step.interval_ms, step.latency_ms) == (5, 10)


@pytest.mark.parametrize("text", ["len0", "len4097"])
def test_len_step_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="answer_tokens must be between 1 and 4096"):
        parse_step(text)


# ------------------------------------------------------------ OpenAI, JSON


@pytest.mark.parametrize("limit_field", ["max_tokens", "max_completion_tokens"])
async def test_answer_cut_by_the_limit_finishes_with_length(post: Post, limit_field: str) -> None:
    body = (await post("x~len20", **{limit_field: 5})).json()
    [choice] = body["choices"]
    assert choice["message"]["content"] == _text(5)
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 5


@pytest.mark.parametrize("fields", [{}, {"max_tokens": 20}, {"max_tokens": 30}])
async def test_answer_within_the_limit_finishes_with_stop(post: Post, fields: dict[str, int]) -> None:
    body = (await post("x~len20", **fields)).json()
    [choice] = body["choices"]
    assert choice["message"]["content"] == _text(20)
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 20


async def test_n_gives_n_choices_each_with_its_own_content(post: Post) -> None:
    body = (await post("gpt-4o-mini", max_tokens=4, n=3)).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert [c["message"]["content"] for c in body["choices"]] == [_text(4, k) for k in range(3)]
    assert [c["finish_reason"] for c in body["choices"]] == ["stop"] * 3
    assert body["choices"][1]["message"]["content"] == "c1tok0 c1tok1 c1tok2 c1tok3"
    assert body["usage"]["completion_tokens"] == 12  # 3 choices x 4 tokens
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 12


async def test_n_choices_are_cut_alike(post: Post) -> None:
    body = (await post("x~len9", max_tokens=2, n=2)).json()
    assert [(c["message"]["content"], c["finish_reason"]) for c in body["choices"]] == [
        ("tok0 tok1", "length"),
        ("c1tok0 c1tok1", "length"),
    ]
    assert body["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize(("n", "code"), [(0, "integer_below_min_value"), (129, "integer_above_max_value")])
async def test_n_out_of_range_is_a_400_naming_n(post: Post, n: int, code: str) -> None:
    resp = await post("gpt-4o-mini", n=n)
    assert resp.status_code == 400
    assert (resp.json()["error"]["param"], resp.json()["error"]["code"]) == ("n", code)


def test_a_prefill_is_matched_per_choice() -> None:
    req = wire.parse_request(
        {"model": "m", "messages": [*USER, {"role": "assistant", "content": "tok0 tok1"}], "max_tokens": 4, "n": 2}
    )
    assert wire.answer_pieces(req, 0) == [" tok2", " tok3"]
    assert wire.answer_pieces(req, 1) == wire.tokens(4, 1)  # not choice 1's words: the full answer
    assert wire.produced_tokens(req) == 2 + 4
    assert wire.stream_pieces(req) == [
        (0, " tok2"),
        (1, "c1tok0"),
        (0, " tok3"),
        (1, " c1tok1"),
        (1, " c1tok2"),
        (1, " c1tok3"),
    ]


# ----------------------------------------------------------- OpenAI, SSE


async def _stream(client: httpx.AsyncClient, model: str, **fields: Any) -> list[dict[str, Any]]:
    body = {"model": model, "messages": USER, "stream": True, **fields}
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200
        return _sse_objects(await resp.aread())


async def test_stream_of_n_choices_carries_each_index_and_finish(client: httpx.AsyncClient) -> None:
    chunks = await _stream(client, "x~len9", max_tokens=3, n=2, stream_options={"include_usage": True})
    *choice_chunks, usage_chunk = chunks
    rows = [
        (c["choices"][0]["index"], c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) for c in choice_chunks
    ]
    role = {"role": "assistant", "content": "", "refusal": None}
    assert rows[:2] == [(0, role, None), (1, role, None)]
    assert rows[-2:] == [(0, {}, "length"), (1, {}, "length")]
    texts = {k: "".join(d.get("content", "") for i, d, _ in rows[2:-2] if i == k) for k in (0, 1)}
    assert texts == {0: _text(3), 1: _text(3, 1)}
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 6


async def test_stream_within_the_limit_finishes_with_stop(client: httpx.AsyncClient) -> None:
    chunks = await _stream(client, "x~len3", max_tokens=10)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, None, "stop"]


async def test_cut_fault_counts_content_chunks_over_every_choice(client: httpx.AsyncClient) -> None:
    body = {"model": "x~cut3", "messages": USER, "stream": True, "max_tokens": 4, "n": 2}
    received = b""
    with pytest.raises(httpx.TransportError):
        async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            async for piece in resp.aiter_raw():
                received += piece
    contents = [
        (obj["choices"][0]["index"], obj["choices"][0]["delta"]["content"])
        for obj in (json.loads(e.removeprefix("data: ")) for e in received.decode().strip().split("\n\n"))
        if "role" not in obj["choices"][0]["delta"]
    ]
    assert contents == [(0, "tok0"), (1, "c1tok0"), (0, " tok1")]


# ---------------------------------------------------------------- Anthropic


@pytest.fixture
async def claude(sim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url, timeout=5.0, headers=ANTHROPIC_HEADERS) as client:
        yield client


@pytest.mark.parametrize(("max_tokens", "stop_reason", "count"), [(5, "max_tokens", 5), (20, "end_turn", 20)])
async def test_anthropic_message_cut_by_max_tokens(
    claude: httpx.AsyncClient, max_tokens: int, stop_reason: str, count: int
) -> None:
    body = {"model": "c~len20", "max_tokens": max_tokens, "messages": USER}
    message = (await claude.post("/v1/messages", json=body)).json()
    assert message["content"] == [{"type": "text", "text": _text(count)}]
    assert message["stop_reason"] == stop_reason
    assert message["usage"]["output_tokens"] == count


@pytest.mark.parametrize(("max_tokens", "stop_reason"), [(2, "max_tokens"), (8, "end_turn")])
async def test_anthropic_stream_message_delta_says_max_tokens(
    claude: httpx.AsyncClient, max_tokens: int, stop_reason: str
) -> None:
    body = {"model": "c~len4", "max_tokens": max_tokens, "messages": USER, "stream": True}
    async with claude.stream("POST", "/v1/messages", json=body) as resp:
        raw = await resp.aread()
    events = [json.loads(block.split("\n")[1].removeprefix("data: ")) for block in raw.decode().strip().split("\n\n")]
    [delta] = [e for e in events if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == stop_reason
    assert delta["usage"]["output_tokens"] == min(max_tokens, 4)
