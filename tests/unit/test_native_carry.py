"""The native carry from the door to the attempt and back (SPEC §13): which body each family's
target is sent (`router._spec`), what a Messages request carries (`messages_native.carried`), how
an answer is rendered by its shape (`messages_native.rendered`), and queued jobs and results of
an older process still decoding."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest
from starlette.datastructures import Headers

from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.config import ProviderConfig, ProviderKind
from turnout.core.native import CHAT, MESSAGES, Native
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences
from turnout.core.types import Target
from turnout.errors import RequestRejected
from turnout.router import RequestInfo, _spec
from turnout.state.breaker_store import Loaded
from turnout.wire import JobPayload, JobResult, payload_decoder, payload_encoder, result_decoder
from turnout_ingress.surfaces.chat import CHAT as CHAT_SURFACE
from turnout_ingress.surfaces.messages.native import carried, rendered

CLIENT: dict[str, Any] = {
    "model": "claude-x",
    "max_tokens": 64,
    "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "system", "content": "early"}, {"role": "user", "content": "hi"}],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "provider": {"only": ["claude"]},
    "next_years_field": True,
}
RAW = json.dumps(CLIENT).encode()
HEADERS = [("x-api-key", "tk-1"), ("anthropic-version", "2023-06-01"), ("anthropic-beta", "b1")]


def _call(kind: ProviderKind, native: Native | None) -> Any:
    provider = ProviderConfig(kind=kind, base_url="http://up", api_key="k")
    request = {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}
    target = Target(provider="p", model="up-model", catalog_model="claude-x")
    return _spec(target, provider, request, RequestInfo(request_id="r"), Policy(), 5.0, native)


def test_an_anthropic_target_is_sent_the_clients_body_with_its_model_and_without_provider() -> None:
    native = carried(RAW, HEADERS).native
    spec = _call("anthropic", native)
    assert spec.native == native
    expected = {k: v for k, v in CLIENT.items() if k != "provider"}
    assert json.loads(spec.body) == {**expected, "model": "up-model"}


@pytest.mark.parametrize("kind", ["openai", "openai_compatible"])
def test_an_openai_family_target_is_sent_the_translation(kind: ProviderKind) -> None:
    spec = _call(kind, carried(RAW, HEADERS).native)
    assert spec.native is None
    assert json.loads(spec.body) == {
        "model": "up-model",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 64,
    }


def test_without_a_carry_every_target_is_sent_the_openai_request() -> None:
    assert _call("anthropic", None).native is None


def test_a_messages_request_carries_its_body_its_headers_and_its_translation() -> None:
    body, preferences, native = carried(RAW, HEADERS)
    assert native == Native(
        surface=MESSAGES,
        body=RAW,
        headers=(("anthropic-version", "2023-06-01"), ("anthropic-beta", "b1")),
    )
    assert preferences.only == ("claude",)
    assert body["messages"][:2] == [{"role": "system", "content": "s"}, {"role": "system", "content": "early"}]


def test_a_request_without_translation_is_carried_with_the_reason_not_refused() -> None:
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
    raw = json.dumps({**CLIENT, "stream": True, "messages": [{"role": "user", "content": [document]}]}).encode()
    body, _, native = carried(raw, HEADERS)
    assert native.crossing is not None and native.crossing[1] == "messages.0.content.0"
    assert body == {"model": "claude-x", "messages": [], "max_tokens": 64, "stream": True}


@pytest.mark.parametrize(
    ("raw", "headers", "param"),
    [
        (json.dumps({**CLIENT, "max_tokens": 0}).encode(), [], "max_tokens"),
        (json.dumps({**CLIENT, "messages": [{"role": "tool", "content": "x"}]}).encode(), [], "messages.0.role"),
        (RAW, [("anthropic-beta", "caf\u00e9")], "anthropic-beta"),
    ],
    ids=["max_tokens", "unknown_role", "non_ascii_header"],
)
def test_a_bad_request_is_still_a_400_naming_the_field(raw: bytes, headers: list[tuple[str, str]], param: str) -> None:
    with pytest.raises(RequestRejected) as refused:
        carried(raw, headers)
    assert (refused.value.status_code, refused.value.param) == (400, param)


def test_a_native_answer_is_rendered_as_is_and_a_chat_one_translated() -> None:
    message = b'{"id":"msg_1","type":"message","model":"claude-up","content":[],"usage":{"cache_read_input_tokens":9}}'
    kept = rendered(200, message, {"x-turnout-provider": "claude", "content-length": "3"}, "rid", shape=MESSAGES)
    assert bytes(kept.body) == message and kept.headers["x-turnout-provider"] == "claude"
    completion = {"id": "c1", "model": "gpt", "choices": [{"message": {"content": "hey"}, "finish_reason": "stop"}]}
    translated = rendered(200, json.dumps(completion).encode(), {}, "rid", shape=CHAT)
    assert json.loads(bytes(translated.body))["content"] == [{"type": "text", "text": "hey"}]
    error = rendered(502, b'{"error": {"message": "no", "code": "provider_failed"}}', {}, "rid", shape=CHAT)
    assert json.loads(bytes(error.body))["error"]["type"] == "api_error"


def test_a_job_and_a_result_from_an_older_process_still_decode() -> None:
    old_payload = {
        "request_id": "r",
        "body": b"{}",
        "org": "acme",
        "squad": None,
        "key": "k",
        "policy": msgspec.to_builtins(Policy()),
        "settings": {},
        "deadline_epoch_s": 1.0,
        "reply_to": "c",
    }
    payload = payload_decoder.decode(msgspec.msgpack.encode(old_payload))
    assert isinstance(payload, JobPayload) and payload.native is None
    old_result = {"request_id": "r", "status_code": 200, "headers": {}, "body": b"{}"}
    result = result_decoder.decode(msgspec.msgpack.encode(old_result))
    assert isinstance(result, JobResult) and result.shape == CHAT


class BeforeNative(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`JobPayload` as a worker of the version before `native` and `operation` decodes it."""

    request_id: str
    body: bytes
    org: str
    squad: str | None
    key: str
    policy: Policy
    settings: RoutingSettings
    deadline_epoch_s: float
    reply_to: str
    trace: dict[str, str] = {}
    preferences: Preferences = Preferences()
    budget_ms: int = 0
    health: Loaded | None = None
    catalog_version: int = 0


def test_a_chat_job_encodes_no_field_a_worker_of_the_version_before_would_refuse() -> None:
    """A rolling upgrade: an ingress with `native` and `operation` beside a worker without them."""
    job = JobPayload(
        request_id="r",
        body=b"{}",
        org="acme",
        squad=None,
        key="k",
        policy=Policy(),
        settings=RoutingSettings(),
        deadline_epoch_s=1.0,
        reply_to="c",
        budget_ms=500,
    )
    old = msgspec.msgpack.decode(payload_encoder.encode(job), type=BeforeNative)
    assert (old.request_id, old.budget_ms) == ("r", 500)
    embeddings = msgspec.structs.replace(job, operation="embeddings")
    try:
        msgspec.msgpack.decode(payload_encoder.encode(embeddings), type=BeforeNative)
    except msgspec.ValidationError as exc:  # a job of a new kind is refused there, naming the field
        assert "operation" in str(exc)
    else:
        raise AssertionError("an embeddings job decoded in a worker that cannot serve it")


def test_a_chat_carry_gives_an_openai_family_target_its_beta_header_and_no_other_family() -> None:
    raw = json.dumps({"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}).encode()
    sent = Headers(raw=[(b"authorization", b"Bearer tk-1"), (b"openai-beta", b"assistants=v2")])  # ASGI: lower-case
    native = CHAT_SURFACE.parse(raw, sent).native
    assert native == Native(surface=CHAT, body=raw, headers=(("openai-beta", "assistants=v2"),))
    assert CHAT_SURFACE.parse(raw, Headers(raw=[(b"authorization", b"Bearer tk-1")])).native is None
    kinds: list[ProviderKind] = ["openai", "openai_compatible", "azure_openai"]
    for kind in kinds:
        spec = _call(kind, native)
        assert (spec.native, spec.passed) == (None, (("openai-beta", "assistants=v2"),)), kind
        assert json.loads(spec.body)["model"] == "up-model"  # the OpenAI request, as without the header
    anthropic = _call("anthropic", native)
    assert (anthropic.native, anthropic.passed) == (None, ())
    with pytest.raises(RequestRejected) as caught:
        CHAT_SURFACE.parse(raw, Headers(raw=[(b"openai-beta", "caf\u00e9".encode())]))
    assert caught.value.param == "openai-beta"


async def test_an_openai_family_request_sends_the_passed_headers_as_they_came() -> None:
    native = Native(surface=CHAT, body=b"{}", headers=(("openai-beta", "assistants=v2"),))
    async with httpx.AsyncClient() as client:
        built = OPENAI_CHAT.build_request(client, _call("openai", native), stream=False)
    assert built.headers["openai-beta"] == "assistants=v2"
    assert "openai-beta" not in OPENAI_CHAT.build_request(client, _call("openai", None), stream=False).headers
