"""The Bedrock family (`bedrock`): the Converse request it translates, the answers, errors and
event-stream frames it reads, and the SigV4 signature it sends (checked by the simulator's
verifier, which recomputes it with botocore)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
from botocore.eventstream import ParserError

from turnout.adapters.base import CallSpec
from turnout.adapters.bedrock import BEDROCK_CONVERSE, aws_error, outcome_of_converse, translated_events
from turnout.adapters.bedrock_events import EventTranslator, Frame, frame_of
from turnout.adapters.bedrock_wire import converse_path, to_converse_request
from turnout.adapters.chat_parts import WireError
from turnout.adapters.families import family_for, provider_name
from turnout.aws import sigv4
from turnout.aws.keys import join_key, split_key
from turnout.core.classify import classify
from turnout.core.types import FailureKind, Target, TransportError
from turnout_sim import eventstream, sigv4_check
from turnout_sim.credentials import AWS_TEST_KEYS

AKID = "AKIASIMULATOR0000001"
KEY = join_key(AKID, AWS_TEST_KEYS[AKID])
MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
PNG = "data:image/png;base64,iVBORw0KGgo="
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}},
}


def _spec(body: dict[str, Any], *, key: str = KEY, model: str = MODEL, region: str = "us-east-1") -> CallSpec:
    return CallSpec(
        target=Target(provider="bedrock", model=model, catalog_model="claude"),
        base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
        api_key=key,
        body=json.dumps(body).encode(),
        timeout_s=5.0,
        request_id="req-1",
        kind="bedrock",
        region=region,
    )


def test_the_registry_names_the_family_for_chat_only() -> None:
    assert family_for("bedrock") is BEDROCK_CONVERSE
    assert family_for("bedrock", "embeddings") is None and family_for("bedrock", "completions") is None
    assert BEDROCK_CONVERSE.stream_media_type == "application/vnd.amazon.eventstream"


def test_a_chat_request_becomes_a_converse_request() -> None:
    body = {
        "model": "claude",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": PNG}},
                ],
            },
            {"role": "user", "content": "And the weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "22C"},
        ],
        "max_tokens": 100,
        "temperature": 1.5,
        "top_p": 0.9,
        "stop": "END",
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "seed": 7,
        "user": "u1",
    }
    assert to_converse_request(body) == {
        "system": [{"text": "Be brief."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "What is this?"},
                    {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                    {"text": "And the weather?"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Oslo"}}}],
            },
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "22C"}]}}]},
        ],
        "inferenceConfig": {"maxTokens": 100, "temperature": 1.0, "topP": 0.9, "stopSequences": ["END"]},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "inputSchema": {"json": {"type": "object"}},
                        "description": "Weather",
                    }
                }
            ],
            "toolChoice": {"tool": {"name": "get_weather"}},
        },
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("auto", {"auto": {}}), ("required", {"any": {}}), (None, None)],
)
def test_tool_choice_translates(choice: Any, expected: Any) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "tool_choice": choice}
    assert to_converse_request(body)["toolConfig"].get("toolChoice") == expected


def test_tool_choice_none_sends_no_tools_unless_the_conversation_holds_tool_calls() -> None:
    plain: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "tool_choice": "none"}
    assert "toolConfig" not in to_converse_request(plain)
    tooled = {**plain, "messages": [*plain["messages"], {"role": "tool", "tool_call_id": "t", "content": "x"}]}
    assert to_converse_request(tooled)["toolConfig"] == {
        "tools": to_converse_request({**plain, "tool_choice": "auto"})["toolConfig"]["tools"]
    }


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}, "response_format"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}
                ]
            },
            "messages[0].content[0].image_url.url",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AA=="}}],
                    }
                ]
            },
            "messages[0].content[0].image_url.url",
        ),
        ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "system", "content": "be nice"}]}, "messages"),
    ],
)
def test_what_converse_cannot_express_is_refused_naming_the_field(extra: dict[str, Any], param: str) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], **extra}
    with pytest.raises(WireError) as caught:
        to_converse_request(body)
    assert caught.value.param == param and "Bedrock" in caught.value.message
    refusal = BEDROCK_CONVERSE.refusal(body, MODEL)
    assert refusal is not None and refusal.param == param


def test_the_model_id_is_one_percent_encoded_path_segment() -> None:
    assert converse_path(MODEL, stream=False) == "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku"
    assert converse_path(arn, stream=True).endswith("inference-profile%2Fus.anthropic.claude-3-haiku/converse-stream")


async def _built(spec: CallSpec, *, stream: bool = False) -> Any:
    async with httpx.AsyncClient() as client:
        return BEDROCK_CONVERSE.build_request(client, spec, stream=stream)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_request_is_signed_as_aws_checks_it(stream: bool) -> None:
    request = await _built(_spec({"messages": [{"role": "user", "content": "hi"}]}), stream=stream)
    assert isinstance(request, httpx.Request)
    assert request.url.raw_path.startswith(b"/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse")
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={AKID}/")
    assert "/us-east-1/bedrock/aws4_request" in headers["authorization"]
    assert headers["x-request-id"] == "req-1" and AWS_TEST_KEYS[AKID] not in str(request.headers)
    checked = sigv4_check.check("POST", str(request.url), headers, request.content)
    assert isinstance(checked, sigv4_check.Signed) and checked.region == "us-east-1"
    wrong = sigv4_check.check("POST", str(request.url), headers, request.content + b" ")
    assert isinstance(wrong, sigv4_check.Refused) and wrong.error_type == "InvalidSignatureException"


async def test_a_session_token_is_sent_and_signed() -> None:
    key = join_key(AKID, AWS_TEST_KEYS[AKID], "tok+en/=")
    request = await _built(_spec({"messages": [{"role": "user", "content": "hi"}]}, key=key))
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["x-amz-security-token"] == "tok+en/=" and "x-amz-security-token" in headers["authorization"]
    assert isinstance(sigv4_check.check("POST", str(request.url), headers, request.content), sigv4_check.Signed)


def test_without_keys_the_credential_chain_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASIMULATOR0000002")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_TEST_KEYS["AKIASIMULATOR0000002"])
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    sigv4.default_chain.cache_clear()
    try:
        frozen = sigv4.credentials_for("")
    finally:
        sigv4.default_chain.cache_clear()
    assert frozen.access_key == "AKIASIMULATOR0000002"


async def test_a_call_that_cannot_be_signed_is_an_auth_failure_without_a_request() -> None:
    result = await _built(_spec({"messages": [{"role": "user", "content": "hi"}]}, key="not-a-bedrock-key"))
    assert result.outcome.status == 401 and classify(result.outcome) is FailureKind.AUTH
    assert "ACCESS_KEY_ID:SECRET_ACCESS_KEY" in result.outcome.message


def test_key_forms() -> None:
    assert split_key("AKIA1:secret") == (("AKIA1", "secret", None))
    assert split_key(join_key("A", "B", "C")).session_token == "C"
    for bad in ("", "a", "a:", ":b", "a:b:c:d", "a :b"):
        with pytest.raises(ValueError, match="ACCESS_KEY_ID"):
            split_key(bad)


def _headers(request_id: str = "rid-1", error: str | None = None) -> httpx.Headers:
    values = {"x-amzn-requestid": request_id}
    if error is not None:
        values["x-amzn-errortype"] = f"{error}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    return httpx.Headers(values)


def test_an_answer_becomes_a_chat_completion() -> None:
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"text": "It is "},
                    {"text": "sunny."},
                    {"toolUse": {"toolUseId": "tu1", "name": "f", "input": {"a": 1}}},
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 10, "outputTokens": 4, "totalTokens": 14, "cacheReadInputTokens": 2},
    }
    result = outcome_of_converse(200, _headers(), json.dumps(answer).encode(), 1_700_000_000.5, model=MODEL)
    body = msgspec.json.decode(result.body or b"")
    assert body["id"] == "rid-1" and body["model"] == MODEL and body["created"] == 1_700_000_000
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "It is sunny."
    assert choice["message"]["tool_calls"] == [
        {"id": "tu1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    ]
    assert body["usage"]["prompt_tokens"] == 12 and (result.usage.input_tokens, result.usage.output_tokens) == (12, 4)


@pytest.mark.parametrize(
    ("stop", "finish"), [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop")]
)
def test_stop_reasons(stop: str, finish: str) -> None:
    answer = {"output": {"message": {"role": "assistant", "content": [{"text": "x"}]}}, "stopReason": stop}
    body = msgspec.json.decode(outcome_of_converse(200, _headers(), json.dumps(answer).encode(), 0).body or b"")
    assert body["choices"][0]["finish_reason"] == finish


@pytest.mark.parametrize("stop", ["guardrail_intervened", "content_filtered"])
def test_a_guardrail_or_filter_stop_is_a_content_policy_failure(stop: str) -> None:
    answer = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Sorry."}]}},
        "stopReason": stop,
        "usage": {"inputTokens": 3, "outputTokens": 2},
    }
    result = outcome_of_converse(200, _headers(), json.dumps(answer).encode(), 0)
    assert result.body is None and classify(result.outcome) is FailureKind.CONTENT_POLICY
    assert stop in result.outcome.message and result.usage.output_tokens == 2


@pytest.mark.parametrize(
    ("status", "error", "message", "kind"),
    [
        (429, "ThrottlingException", "Too many requests, please wait before trying again.", FailureKind.RATE_LIMITED),
        (429, "ModelNotReadyException", "Model is not ready to serve inference requests.", FailureKind.RATE_LIMITED),
        (503, "ServiceUnavailableException", "Bedrock is unable to process your request.", FailureKind.SERVER_ERROR),
        (500, "InternalServerException", "The system encountered an unexpected error.", FailureKind.SERVER_ERROR),
        (408, "ModelTimeoutException", "Model has timed out in processing the request.", FailureKind.TIMEOUT),
        (400, "ValidationException", "Input is too long for requested model.", FailureKind.CONTEXT_LENGTH),
        (400, "ValidationException", "too many input tokens", FailureKind.CONTEXT_LENGTH),
        (400, "ValidationException", "Malformed input request.", FailureKind.CLIENT_ERROR),
        (403, "AccessDeniedException", "You don't have access to the model.", FailureKind.AUTH),
        (
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
            FailureKind.AUTH,
        ),
        (404, "ResourceNotFoundException", "Could not resolve the foundation model.", FailureKind.CLIENT_ERROR),
        (400, "ServiceQuotaExceededException", "Your request exceeds the service quota.", FailureKind.QUOTA_EXHAUSTED),
    ],
)
def test_errors_keep_awss_type_and_classify(status: int, error: str, message: str, kind: FailureKind) -> None:
    result = outcome_of_converse(status, _headers(error=error), json.dumps({"message": message}).encode(), 0)
    assert (result.outcome.status, result.outcome.error_type, result.outcome.message) == (status, error, message)
    assert classify(result.outcome) is kind


def test_an_error_type_may_come_in_the_body() -> None:
    assert aws_error(httpx.Headers(), {"__type": "com.amazon.coral#ThrottlingException", "Message": "m"}) == (
        "ThrottlingException",
        "m",
    )


def test_a_2xx_that_is_no_answer_is_malformed() -> None:
    result = outcome_of_converse(200, _headers(), b'{"ok": true}', 0)
    assert result.outcome.transport is TransportError.PROTOCOL


def _frame(name: str, data: dict[str, Any]) -> Frame:
    return Frame("event", name, data)


def test_the_stream_translator_makes_chat_chunks() -> None:
    t = EventTranslator(answer_id="rid", model=MODEL, created_s=5)
    deltas = [
        t.feed(_frame("messageStart", {"role": "assistant", "p": "abc"})),
        t.feed(_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})),
        t.feed(_frame("contentBlockStop", {"contentBlockIndex": 0})),
        t.feed(
            _frame(
                "contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tu", "name": "f"}}}
            )
        ),
        t.feed(_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"a":'}}})),
        t.feed(_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"reasoningContent": {"text": "hmm"}}})),
    ]
    assert [c["choices"][0]["delta"] for chunks in deltas for c in chunks] == [
        {"role": "assistant", "content": ""},
        {"content": "Hi"},
        {"tool_calls": [{"index": 0, "id": "tu", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]},
    ]
    assert not t.finished
    (finish,) = t.feed(_frame("messageStop", {"stopReason": "tool_use"}))
    assert finish["choices"][0]["finish_reason"] == "tool_calls" and t.finished and not t.done
    (tally,) = t.feed(_frame("metadata", {"usage": {"inputTokens": 3, "outputTokens": 5}}))
    assert tally["choices"] == [] and tally["usage"]["total_tokens"] == 8 and t.done


def test_exception_and_error_messages_are_read() -> None:
    frame = frame_of(
        {":message-type": "exception", ":exception-type": "throttlingException"}, b'{"message":"slow down"}'
    )
    assert frame == Frame("exception", "throttlingException", {"message": "slow down"})
    error = frame_of({":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b"")
    assert error == Frame("error", "InternalFailure", {"message": "boom"})


class _Body(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part


async def _events(parts: list[bytes]) -> list[list[str]]:
    response = httpx.Response(200, stream=_Body(parts))
    translator = EventTranslator(answer_id="rid", model="", created_s=0)
    return [
        [("" if e.event == "message" else e.event) + e.data for e in batch]
        async for batch in translated_events(response, translator)
    ]


async def test_a_framed_stream_is_read_a_read_at_a_time_frames_split_across_reads() -> None:
    frames = [
        eventstream.event("messageStart", {"role": "assistant"}),
        eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        eventstream.event("messageStop", {"stopReason": "end_turn"}),
        eventstream.event("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1}}),
    ]
    whole = b"".join(frames)
    batches = await _events([whole[:10], whole[10 : len(frames[0]) + 5], whole[len(frames[0]) + 5 :]])
    assert len(batches) == 2 and batches[-1][-1] == "[DONE]"
    assert '"content":"Hi"' in batches[1][0] and '"finish_reason":"stop"' in batches[1][1]


async def test_a_stream_that_ends_after_its_stop_without_metadata_ends_cleanly() -> None:
    frames = [
        eventstream.event("contentBlockDelta", {"delta": {"text": "x"}}),
        eventstream.event("messageStop", {"stopReason": "end_turn"}),
    ]
    assert (await _events(frames))[-1] == ["[DONE]"]
    assert "[DONE]" not in str(await _events(frames[:1]))  # cut before messageStop: no clean end


async def test_an_exception_message_ends_the_stream_with_an_error_event() -> None:
    frames = [
        eventstream.event("messageStart", {"role": "assistant"}),
        eventstream.exception("modelStreamErrorException", "broke"),
    ]
    (batch,) = await _events([b"".join(frames)])
    error = json.loads(batch[-1].removeprefix("error"))
    assert error == {"error": {"type": "modelStreamErrorException", "message": "broke"}}


async def test_a_frame_with_a_bad_crc_raises_botocores_parser_error() -> None:
    with pytest.raises(ParserError):
        await _events([eventstream.corrupted(eventstream.event("messageStart", {"role": "assistant"}))])


def test_spans_name_bedrock_by_its_well_known_provider_name() -> None:
    assert provider_name("bedrock", "bedrock-east") == "aws.bedrock"
    assert provider_name("openai_compatible", "pa") == "openai"  # any server: the API it speaks
    assert provider_name("openai_compatible", "groq") == "groq"  # named by a well-known value: that value


def test_a_process_that_calls_no_bedrock_provider_never_loads_botocore() -> None:
    code = (
        "import sys, turnout.adapters.exchange, turnout.adapters.families, turnout.config, turnout.router; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('botocore', 'boto3')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_simulator_canonicalises_the_path_as_aws_does() -> None:
    raw, encoded = "http://h:1/model/a.b-v1:0/converse", "http://h:1/model/a.b-v1%3A0/converse"
    assert sigv4_check.canonical_url(raw) == sigv4_check.canonical_url(encoded) == encoded
    arn = "http://h/model/arn%3Aaws%3Ax%2Fy/converse-stream"
    assert sigv4_check.canonical_url(arn) == arn


async def test_the_frames_before_a_broken_one_are_given_first() -> None:
    good = eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})
    broken = eventstream.corrupted(eventstream.event("contentBlockDelta", {"delta": {"text": "x"}}))
    response = httpx.Response(200, stream=_Body([good + broken]))
    events = translated_events(response, EventTranslator(answer_id="", model="", created_s=0))
    assert '"content":"Hi"' in (await anext(events))[0].data
    with pytest.raises(ParserError):
        await anext(events)
