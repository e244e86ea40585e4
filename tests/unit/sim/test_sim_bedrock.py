"""The simulator speaks Amazon Bedrock: the official SDK's `bedrock-runtime` client (boto3) talks to
its Converse and ConverseStream routes (text, tool use, the event stream), its errors raise the
`ClientError` / `EventStreamError` codes AWS's do, and it refuses a missing or wrong signature."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError

from turnout_sim import eventstream
from turnout_sim.attempt_log import auth_fingerprint
from turnout_sim.credentials import AWS_TEST_KEYS

AKID = "AKIASIMULATOR0000001"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
HI = [{"role": "user", "content": [{"text": "hi there"}]}]
WEATHER = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}},
            }
        }
    ]
}
T = TypeVar("T")


@pytest.fixture
def make(sim_url: str) -> Iterator[Callable[..., Any]]:
    """`make(secret=None, akid=AKID)`: a boto3 `bedrock-runtime` client of the simulator (no retries),
    closed at the test's end (its connection pool)."""
    made: list[Any] = []

    def client(*, secret: str | None = None, akid: str = AKID) -> Any:
        made.append(
            boto3.client(
                "bedrock-runtime",
                endpoint_url=sim_url,
                region_name="us-east-1",
                aws_access_key_id=akid,
                aws_secret_access_key=secret or AWS_TEST_KEYS.get(akid, "unknownSecret"),
                config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
            )
        )
        return made[-1]

    yield client
    for each in made:
        each.close()


def _events(client: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Every event of one `converse_stream`, its stream closed even when it raised."""
    stream = client.converse_stream(**kwargs)["stream"]
    try:
        return list(stream)
    finally:
        stream.close()


async def _run(call: Callable[[], T]) -> T:
    """`call` in a thread: boto3 blocks, and the simulator runs on this loop."""
    return await asyncio.to_thread(call)


async def test_converse_answers_text_with_usage(make: Callable[..., Any]) -> None:
    client = make()
    answer = await _run(lambda: client.converse(modelId=MODEL, messages=HI, inferenceConfig={"maxTokens": 3}))
    assert answer["output"]["message"] == {"role": "assistant", "content": [{"text": "tok0 tok1 tok2"}]}
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"] == {"inputTokens": 2, "outputTokens": 3, "totalTokens": 5}
    assert answer["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"]


async def test_converse_stream_is_an_event_stream_boto3_reads(make: Callable[..., Any]) -> None:
    client = make()

    def events() -> list[dict[str, Any]]:
        answer = client.converse_stream(modelId=MODEL, messages=HI, inferenceConfig={"maxTokens": 3})
        assert answer["ResponseMetadata"]["HTTPHeaders"]["content-type"] == eventstream.MEDIA_TYPE
        try:
            return list(answer["stream"])
        finally:
            answer["stream"].close()

    got = await _run(events)
    assert [next(iter(e)) for e in got] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert "".join(e["contentBlockDelta"]["delta"]["text"] for e in got if "contentBlockDelta" in e) == "tok0 tok1 tok2"
    assert got[-2]["messageStop"]["stopReason"] == "end_turn" and got[-1]["metadata"]["usage"]["outputTokens"] == 3


async def test_a_model_arn_with_slashes_is_one_model(make: Callable[..., Any]) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku~429,200"
    client = make()
    with pytest.raises(ClientError) as caught:
        await _run(lambda: client.converse(modelId=arn, messages=HI))
    assert caught.value.response["Error"]["Code"] == "ThrottlingException"
    assert (await _run(lambda: client.converse(modelId=arn, messages=HI)))["stopReason"] == "end_turn"


async def test_tools_are_called_and_a_result_is_quoted(make: Callable[..., Any]) -> None:
    client = make()
    answer = await _run(lambda: client.converse(modelId=MODEL, messages=HI, toolConfig=WEATHER))
    (block,) = answer["output"]["message"]["content"]
    assert answer["stopReason"] == "tool_use" and block["toolUse"]["name"] == "get_weather"
    assert block["toolUse"]["input"] == {"city": "sim"}
    result = {"toolResult": {"toolUseId": block["toolUse"]["toolUseId"], "content": [{"text": "22C"}]}}
    history = [*HI, answer["output"]["message"], {"role": "user", "content": [result]}]
    follow = await _run(lambda: client.converse(modelId=MODEL, messages=history, toolConfig=WEATHER))
    assert follow["output"]["message"]["content"] == [{"text": "Tool result: 22C"}]


async def test_a_streamed_tool_use_comes_as_input_fragments(make: Callable[..., Any]) -> None:
    client = make()
    got = await _run(lambda: _events(client, modelId=MODEL, messages=HI, toolConfig=WEATHER))
    start = next(e["contentBlockStart"] for e in got if "contentBlockStart" in e)
    assert start["start"]["toolUse"]["name"] == "get_weather"
    pieces = [e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in got if "contentBlockDelta" in e]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == {"city": "sim"}
    assert next(e["messageStop"] for e in got if "messageStop" in e)["stopReason"] == "tool_use"


@pytest.mark.parametrize(
    ("step", "code", "status"),
    [
        ("429", "ThrottlingException", 429),
        ("429ra2", "ThrottlingException", 429),
        ("503", "ServiceUnavailableException", 503),
        ("529", "ServiceUnavailableException", 503),
        ("500", "InternalServerException", 500),
        ("408", "ModelTimeoutException", 408),
        ("400", "ValidationException", 400),
        ("ctx", "ValidationException", 400),
        ("403", "AccessDeniedException", 403),
        ("404", "ResourceNotFoundException", 404),
        ("quota", "ServiceQuotaExceededException", 400),
    ],
)
async def test_each_error_step_raises_awss_client_error(
    make: Callable[..., Any], step: str, code: str, status: int
) -> None:
    client = make()
    with pytest.raises(ClientError) as caught:
        await _run(lambda: client.converse(modelId=f"m~{step}", messages=HI))
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)
    if step == "ctx":
        assert error["Error"]["Message"] == "Input is too long for requested model."


@pytest.mark.parametrize(
    ("step", "code"), [("bodyerr429", "throttlingException"), ("bodyerr", "modelStreamErrorException")]
)
async def test_a_stream_exception_raises_the_event_stream_error(make: Callable[..., Any], step: str, code: str) -> None:
    client = make()
    with pytest.raises(EventStreamError) as caught:
        await _run(lambda: _events(client, modelId=f"m~{step}", messages=HI))
    assert caught.value.response["Error"]["Code"] == code


@pytest.mark.parametrize(("step", "stop"), [("policy", "guardrail_intervened"), ("cf200", "content_filtered")])
async def test_a_guardrail_step_answers_the_blocked_message(make: Callable[..., Any], step: str, stop: str) -> None:
    client = make()
    answer = await _run(lambda: client.converse(modelId=f"m~{step}", messages=HI))
    assert answer["stopReason"] == stop
    assert answer["output"]["message"]["content"] == [{"text": "Sorry, the model cannot answer this question."}]
    streamed = await _run(lambda: _events(client, modelId=f"m~{step}", messages=HI))
    assert next(e["messageStop"] for e in streamed if "messageStop" in e)["stopReason"] == stop


async def test_a_wrong_secret_is_an_invalid_signature(make: Callable[..., Any]) -> None:
    client = make(secret="wrongSecret")
    with pytest.raises(ClientError) as caught:
        await _run(lambda: client.converse(modelId=MODEL, messages=HI))
    assert caught.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


async def test_a_revoked_key_is_unrecognized_and_an_unknown_one_is_accepted(make: Callable[..., Any]) -> None:
    revoked = make(akid="AKIAREVOKED000000001")
    with pytest.raises(ClientError) as caught:
        await _run(lambda: revoked.converse(modelId=MODEL, messages=HI))
    assert caught.value.response["Error"]["Code"] == "UnrecognizedClientException"
    unknown = make(akid="AKIAUNKNOWN000000001")
    assert (await _run(lambda: unknown.converse(modelId=MODEL, messages=HI)))["stopReason"] == "end_turn"


async def test_an_unsigned_request_is_refused_and_the_signer_is_logged(sim_url: str, make: Callable[..., Any]) -> None:
    async with httpx.AsyncClient(base_url=sim_url) as http:
        answer = await http.post(f"/model/{MODEL}/converse", json={"messages": HI})
        assert answer.status_code == 403
        assert answer.headers["x-amzn-errortype"].startswith("UnrecognizedClientException:")
        assert answer.json() == {"message": "The security token included in the request is invalid."}
        client = make()
        await _run(lambda: client.converse(modelId="logged", messages=HI))
        (entry,) = (await http.get("/sim/log", params={"model": "logged"})).json()
    assert entry["auth_fingerprint"] == auth_fingerprint(AKID)
    assert json.loads(entry["received"]["body"])["messages"] == HI and "x-amz-date" in entry["received"]["headers"]


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([{"role": "assistant", "content": [{"text": "x"}]}], "must start with a user message"),
        ([*HI, *HI], "must alternate between user and assistant roles"),
        ([{"role": "user", "content": []}], "is empty"),
    ],
)
async def test_bedrocks_own_validation(make: Callable[..., Any], messages: list[Any], words: str) -> None:
    client = make()
    with pytest.raises(ClientError, match=words) as caught:
        await _run(lambda: client.converse(modelId=MODEL, messages=messages))
    assert caught.value.response["Error"]["Code"] == "ValidationException"


async def test_count_tokens_counts_a_converse_input_as_boto3_asks_and_logs_no_call(
    sim_url: str, make: Callable[..., Any]
) -> None:
    client = make()
    converse = {"messages": [{"role": "user", "content": [{"text": "three words here"}]}], "system": [{"text": "be"}]}
    counted = await _run(
        lambda: client.count_tokens(modelId=MODEL, input={"converse": {**converse, "toolConfig": WEATHER}})
    )
    assert counted["inputTokens"] == 4  # the words of the message and system text, as a call's usage counts them
    with pytest.raises(ClientError) as refused:
        await _run(lambda: make(secret="wrongSecret").count_tokens(modelId=MODEL, input={"converse": converse}))
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
    with pytest.raises(ClientError) as invalid:
        await _run(
            lambda: client.count_tokens(
                modelId=MODEL, input={"converse": {"messages": [{"role": "assistant", "content": [{"text": "x"}]}]}}
            )
        )
    assert invalid.value.response["Error"]["Code"] == "ValidationException"
    async with httpx.AsyncClient(base_url=sim_url) as http:
        assert (await http.get("/sim/log")).json() == []  # counting is no model call
