"""`POST /v1/completions` through the official `openai` SDK: prompt forms, echo, logprobs, streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from turnout_sim import completions_wire

TEXT3 = "tok0 tok1 tok2"


@pytest.fixture
async def oai(sim_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key="x", max_retries=0, timeout=10.0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def http(sim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url, headers={"Authorization": "Bearer x"}, timeout=5.0) as client:
        yield client


async def test_a_string_prompt_gets_the_deterministic_text(oai: openai.AsyncOpenAI) -> None:
    result = await oai.completions.create(model="gpt-3.5-turbo-instruct", prompt="say hi please", max_tokens=3)
    assert result.id.startswith("cmpl-") and result.object == "text_completion"
    assert result.model == "gpt-3.5-turbo-instruct" and isinstance(result.created, int)
    [choice] = result.choices
    assert (choice.text, choice.index, choice.logprobs, choice.finish_reason) == (TEXT3, 0, None, "stop")
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.total_tokens) == (3, 3, 6)


async def test_max_tokens_defaults_to_16(oai: openai.AsyncOpenAI) -> None:
    result = await oai.completions.create(model="m", prompt="hi")
    assert result.choices[0].text == " ".join(f"tok{i}" for i in range(16))
    assert result.usage is not None and result.usage.completion_tokens == 16


@pytest.mark.parametrize(
    ("prompt", "texts", "prompt_tokens"),
    [
        ("one two", ["one two"], 2),
        (["one two", "three"], ["one two", "three"], 3),
        ([5, 6, 7], ["t5 t6 t7"], 3),
        ([[5, 6], [7]], ["t5 t6", "t7"], 3),
    ],
    ids=["string", "strings", "token-array", "token-arrays"],
)
async def test_every_prompt_form(oai: openai.AsyncOpenAI, prompt: Any, texts: list[str], prompt_tokens: int) -> None:
    plain = await oai.completions.create(model="m", prompt=prompt, max_tokens=3)
    echoed = await oai.completions.create(model="m", prompt=prompt, max_tokens=3, echo=True)
    answers = [TEXT3] + [" ".join(f"c{k}tok{i}" for i in range(3)) for k in range(1, len(texts))]
    assert [c.index for c in plain.choices] == list(range(len(texts)))
    assert [c.text for c in plain.choices] == answers
    assert [c.text for c in echoed.choices] == [t + a for t, a in zip(texts, answers, strict=True)]
    assert plain.usage is not None and plain.usage.prompt_tokens == prompt_tokens
    assert plain.usage.completion_tokens == 3 * len(texts)


async def test_n_choices_per_prompt_are_indexed_prompt_major(oai: openai.AsyncOpenAI) -> None:
    result = await oai.completions.create(model="m", prompt=["a", "b"], n=2, max_tokens=1, echo=True)
    assert [(c.index, c.text) for c in result.choices] == [(0, "atok0"), (1, "ac1tok0"), (2, "bc2tok0"), (3, "bc3tok0")]
    assert result.usage is not None and result.usage.completion_tokens == 4


async def test_logprobs_cover_each_token_with_offsets(oai: openai.AsyncOpenAI) -> None:
    result = await oai.completions.create(model="m", prompt="ab cd", max_tokens=3, logprobs=2)
    logprobs = result.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.tokens == ["tok0", " tok1", " tok2"]
    assert logprobs.token_logprobs == [-0.1, -0.2, -0.3]
    assert logprobs.top_logprobs == [
        {"tok0": -0.1, "alt1": -1.1},
        {" tok1": -0.2, "alt1": -1.2},
        {" tok2": -0.3, "alt1": -1.3},
    ]
    assert logprobs.text_offset == [5, 9, 14]  # after the 5 characters of the prompt


async def test_logprobs_zero_still_give_the_sampled_token(oai: openai.AsyncOpenAI) -> None:
    result = await oai.completions.create(model="m", prompt="x", max_tokens=2, logprobs=0)
    logprobs = result.choices[0].logprobs
    assert logprobs is not None and logprobs.top_logprobs == [{"tok0": -0.1}, {" tok1": -0.2}]


async def test_echo_with_logprobs_covers_the_prompt_first(http: httpx.AsyncClient) -> None:
    body = {"model": "m", "prompt": "ab  cd", "max_tokens": 2, "echo": True, "logprobs": 1}
    choice = (await http.post("/v1/completions", json=body)).json()["choices"][0]
    assert choice["text"] == "ab  cdtok0 tok1"
    logprobs = choice["logprobs"]
    assert logprobs["tokens"] == ["ab", "  cd", "tok0", " tok1"]
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert logprobs["token_logprobs"] == [None, -0.2, -0.1, -0.2]
    assert logprobs["top_logprobs"][0] is None
    assert logprobs["text_offset"] == [0, 2, 6, 10]


async def test_stream_pieces_finish_usage_and_done(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.completions.create(
        model="m", prompt="hi", max_tokens=4, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.object == "text_completion" and c.id == chunks[0].id for c in chunks)
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].finish_reason is None]
    assert texts == ["tok0", " tok1", " tok2", " tok3"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices] == [None] * 4 + ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 1 + 4


async def test_stream_wire_format(http: httpx.AsyncClient) -> None:
    body = {"model": "m", "prompt": "p", "max_tokens": 2, "stream": True, "echo": True, "logprobs": 0}
    resp = await http.post("/v1/completions", json=body)
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in resp.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(set(c) == {"id", "object", "created", "model", "choices"} for c in chunks)  # no usage unless asked
    choices = [c["choices"][0] for c in chunks]
    assert [c["text"] for c in choices] == ["p", "tok0", " tok1", ""]
    assert all(set(c) == {"text", "index", "logprobs", "finish_reason"} for c in choices)
    assert choices[1]["logprobs"] == {
        "tokens": ["tok0"],
        "token_logprobs": [-0.1],
        "top_logprobs": [{"tok0": -0.1}],
        "text_offset": [1],
    }
    assert choices[-1] == {"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}


async def test_streamed_choices_round_robin(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.completions.create(model="m", prompt=[[1], [2]], max_tokens=2, stream=True)
    texts: dict[int, str] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert texts == {0: "tok0 tok1", 1: "c1tok0 c1tok1"}


async def test_json_wire_format(http: httpx.AsyncClient) -> None:
    body = {"model": "m", "prompt": "p", "max_tokens": 1, "suffix": "end", "temperature": 0.2, "stop": ["\n"]}
    answer = (await http.post("/v1/completions", json=body | {"best_of": 2, "anything": {"x": 1}})).json()
    assert set(answer) == {"id", "object", "created", "model", "choices", "usage"}
    assert answer["choices"] == [{"text": "tok0", "index": 0, "logprobs": None, "finish_reason": "stop"}]
    assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}  # suffix is input


async def test_a_longer_answer_is_cut_by_max_tokens(oai: openai.AsyncOpenAI) -> None:
    cut = await oai.completions.create(model="l~len40", prompt="x")
    assert cut.choices[0].finish_reason == "length" and len(cut.choices[0].text.split()) == 16
    whole = await oai.completions.create(model="l~len5", prompt="x", max_tokens=10)
    assert whole.choices[0].finish_reason == "stop" and whole.choices[0].text == "tok0 tok1 tok2 tok3 tok4"
    nothing = await oai.completions.create(model="m", prompt="x", max_tokens=0, echo=True)
    assert (nothing.choices[0].text, nothing.choices[0].finish_reason) == ("x", "length")


def test_prompt_tokens_rebuild_the_prompt() -> None:
    for text in ["", "a", " a  b\n", "a b  ", "   "]:
        assert "".join(completions_wire.prompt_tokens(text)) == text
