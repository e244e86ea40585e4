"""The embeddings and legacy completions surfaces: every accepted form passes, every bad one is a
400 naming its field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from turnout.errors import RequestRejected
from turnout_ingress.surfaces.completions import COMPLETIONS, parse_completions_request
from turnout_ingress.surfaces.embeddings import EMBEDDINGS, parse_embeddings_request
from turnout_ingress.surfaces.registry import SURFACES


def _raw(**fields: Any) -> bytes:
    return msgspec.json.encode({"model": "emb", **fields})


@pytest.mark.parametrize(
    "fields",
    [
        {"input": "hello"},
        {"input": ["a", "b"]},
        {"input": [1, 2, 3]},
        {"input": [[1, 2], [3]]},
        {"input": "x", "dimensions": 256, "encoding_format": "base64", "user": "u-1", "extra": {"kept": True}},
        {"input": "x", "encoding_format": "float", "stream": False},
    ],
)
def test_every_documented_embeddings_form_is_accepted_and_unknown_fields_kept(fields: dict[str, Any]) -> None:
    assert parse_embeddings_request(_raw(**fields)) == {"model": "emb", **fields}


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({}, "input", "`input` is required"),
        ({"input": ""}, "input", "cannot be an empty string"),
        ({"input": []}, "input", "non-empty one"),
        ({"input": ["a", ""]}, "input[1]", "non-empty string"),
        ({"input": ["a", 3]}, "input[1]", "non-empty string"),
        ({"input": [[1], "a"]}, "input[1]", "token ids"),
        ({"input": [[1], []]}, "input[1]", "token ids"),
        ({"input": [1, -2]}, "input[1]", "token id"),
        ({"input": [True]}, "input[0]", "token ids"),
        ({"input": {"text": "x"}}, "input", "must be a string"),
        ({"input": ["a"] * 2049}, "input", "at most 2048 inputs (got 2049)"),
        ({"input": [[1]] * 2049}, "input", "at most 2048 inputs (got 2049)"),
        ({"input": "x", "dimensions": 0}, "dimensions", "from 1 to"),
        ({"input": "x", "dimensions": "256"}, "dimensions", "from 1 to"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format", "base64, float"),
        ({"input": "x", "user": 5}, "user", "a string"),
        ({"input": "x", "stream": True}, "stream", "not streamed"),
    ],
)
def test_a_bad_embeddings_request_names_its_field(fields: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(RequestRejected) as caught:
        parse_embeddings_request(_raw(**fields))
    assert (caught.value.status_code, caught.value.param) == (400, param)
    assert words in caught.value.message


def test_the_embeddings_surface_takes_the_provider_object_out_and_asks_for_embeddings() -> None:
    inbound = EMBEDDINGS.parse(_raw(input="x", provider={"only": ["oa"]}), {})
    assert inbound.operation == "embeddings" and not inbound.stream
    assert "provider" not in inbound.body and inbound.preferences.only == ("oa",)


@pytest.mark.parametrize(
    "fields",
    [
        {"prompt": ""},
        {"prompt": "def f(", "max_tokens": 16, "stream": True, "suffix": "\n", "echo": False},
        {"prompt": ["a", ""], "n": 2, "temperature": 0.2, "logprobs": 5},
        {"prompt": [[1, 2]], "max_tokens": 0, "echo": True},
    ],
)
def test_every_documented_completions_form_is_accepted(fields: dict[str, Any]) -> None:
    assert parse_completions_request(_raw(**fields)) == {"model": "emb", **fields}


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({}, "prompt"),
        ({"prompt": 3}, "prompt"),
        ({"prompt": ["a", 1]}, "prompt[1]"),
        ({"prompt": "x", "stream": "yes"}, "stream"),
        ({"prompt": "x", "max_tokens": -1}, "max_tokens"),
        ({"prompt": "x", "n": 0}, "n"),
        ({"prompt": "x", "logprobs": 6}, "logprobs"),
        ({"prompt": "x", "temperature": 3}, "temperature"),
        ({"prompt": "x", "top_p": True}, "top_p"),
        ({"prompt": "x", "user": 5}, "user"),
        ({"prompt": "x", "suffix": 5}, "suffix"),
        ({"prompt": "x", "stop": 5}, "stop"),
        ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ],
)
def test_a_bad_completions_request_names_its_field(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestRejected) as caught:
        parse_completions_request(_raw(**fields))
    assert (caught.value.status_code, caught.value.param) == (400, param)


def test_the_completions_surface_asks_for_completions_and_may_stream() -> None:
    inbound = COMPLETIONS.parse(_raw(prompt="x", stream=True), {})
    assert inbound.operation == "completions" and inbound.stream


def test_the_registry_serves_five_surfaces_on_distinct_paths() -> None:
    assert [s.path for s in SURFACES] == [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/embeddings",
        "/v1/completions",
        "/v1/responses",
    ]


def test_one_token_array_is_one_input_whatever_its_length() -> None:
    assert parse_embeddings_request(_raw(input=list(range(4096))))["input"] == list(range(4096))


def test_a_null_optional_field_is_left_out_of_what_the_provider_is_sent() -> None:
    raw = _raw(input="x", encoding_format=None, dimensions=None, user="u")
    inbound = EMBEDDINGS.parse(raw, {})
    assert msgspec.json.decode(inbound.job_body) == {"model": "emb", "input": "x", "user": "u"}
    plain = _raw(input="x")
    assert EMBEDDINGS.parse(plain, {}).job_body is plain  # nothing left out: the client's bytes
