"""`api: responses` offers (README "The Responses surface"): the config check, the catalog,
the family they are called through, and the router skipping them for a request that did not
come on `/v1/responses` — and skipping a chat-api offer for one whose built-in tools could not
be left out — without an attempt."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from support.clocks import FakeClock
from support.routers import fake_router
from turnout.adapters.families import family_for
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.adapters.openai_responses import OPENAI_RESPONSES
from turnout.answer import answer_of
from turnout.catalog import Catalog
from turnout.config import OfferConfig, parse_config
from turnout.core.native import RESPONSES, Native
from turnout.core.plan import RoutingSettings
from turnout.errors import ConfigError
from turnout.router import RequestInfo

CONFIG = """\
providers:
  gpt: {{kind: openai_compatible, base_url: "http://gpt.test/v1", api_key: key-g}}
  oai: {{kind: openai, base_url: "http://oai.test/v1", api_key: key-o}}
  claude: {{kind: anthropic, base_url: "http://claude.test", api_key: key-c}}
models:
  deep: {{offers: [{{provider: oai, model: deep-research, api: responses}}]}}
  mixed:
    order: priority
    offers: [{{provider: gpt, model: g-1}}, {{provider: oai, model: o-resp, api: responses}}]
{extra}"""

RESPONSE: Any = {
    "id": "resp_up",
    "object": "response",
    "status": "completed",
    "model": "o-resp",
    "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}],
    "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
}


def _config(extra: str = "") -> Any:
    return parse_config(CONFIG.format(extra=extra), env={})


def test_an_offer_is_chat_unless_it_says_responses() -> None:
    catalog = Catalog(_config())
    assert catalog.apis == {"oai/deep-research": "responses", "gpt/g-1": "chat", "oai/o-resp": "responses"}


@pytest.mark.parametrize("said", ["", ', "api": "chat"'], ids=["absent", "chat"])
def test_a_chat_offer_is_stored_as_before_the_field_existed(said: str) -> None:
    """The default is never encoded: a catalog without `api: responses` offers is what a process
    of the version before reads (it refuses unknown fields), and its file digest is unchanged."""
    offer = msgspec.json.decode(f'{{"provider": "p", "model": "m"{said}}}', type=OfferConfig)
    assert offer.api_in_force == "chat"
    assert msgspec.json.decode(msgspec.json.encode(offer)) == {
        "provider": "p",
        "model": "m",
        "input_usd_per_mtok": 0.0,
        "output_usd_per_mtok": 0.0,
        "supports_prefill": True,
    }
    responses = msgspec.json.decode(b'{"provider": "p", "model": "m", "api": "responses"}', type=OfferConfig)
    assert responses.api_in_force == "responses" and b'"api":"responses"' in msgspec.json.encode(responses)


@pytest.mark.parametrize(
    ("extra", "what"),
    [
        (
            "  bad: {offers: [{provider: claude, model: c-1, api: responses}]}\n",
            (
                "models.bad.offers[0].api: `responses` needs a chat model's offer on a provider of kind openai or "
                "openai_compatible; 'claude' is `anthropic`"
            ),
        ),
        (
            "  emb: {type: embedding, offers: [{provider: oai, model: e-1, api: responses}]}\n",
            (
                "models.emb.offers[0].api: `responses` needs a chat model's offer on a provider of kind openai or "
                "openai_compatible; 'oai' is `openai` and the model is of type `embedding`"
            ),
        ),
        (
            "  again: {offers: [{provider: oai, model: deep-research}]}\n",
            (
                "models.again.offers[0]: oai/deep-research is also models.deep.offers[0], with other prices, "
                "supports_prefill or api"
            ),
        ),
        ("  odd: {offers: [{provider: oai, model: o-2, api: messages}]}\n", "models.odd.offers[0].api"),
    ],
    ids=["anthropic-provider", "embedding-model", "one-target-two-apis", "unknown-api"],
)
def test_a_bad_api_is_refused_naming_the_offer(extra: str, what: str) -> None:
    with pytest.raises(ConfigError) as info:
        _config(extra)
    assert what in str(info.value)


@pytest.mark.parametrize(
    ("kind", "operation", "api", "family"),
    [
        ("openai", "chat", "responses", OPENAI_RESPONSES),
        ("openai_compatible", "chat", "responses", OPENAI_RESPONSES),
        ("anthropic", "chat", "responses", None),
        ("openai", "embeddings", "responses", None),
        ("openai", "completions", "responses", None),
        ("openai", "chat", "chat", OPENAI_CHAT),
    ],
)
def test_family_for_an_offers_api(kind: Any, operation: Any, api: Any, family: Any) -> None:
    assert family_for(kind, operation, api) is family


async def _route(model: str, request: dict[str, Any], native: Native | None) -> tuple[Any, list[str]]:
    """(routed, the upstream paths called, in order)."""
    config = _config()
    catalog = Catalog(config)
    called: list[str] = []

    def answer(call: httpx.Request) -> httpx.Response:
        called.append(f"{call.url.host}{call.url.path}")
        return httpx.Response(200, json=RESPONSE)

    router = fake_router(catalog, httpx.MockTransport(answer), clock=FakeClock(0.0))
    plan, view = await router.plan(model, RoutingSettings(), config.policy)
    info = RequestInfo(request_id="rid", org="acme", requested_model=model)
    routed = await router.route(
        {**request, "model": model},
        plan=plan,
        view=view,
        policy=config.policy,
        time_left_s=30,
        info=info,
        native=native,
    )
    return routed, called


CHAT_REQUEST: Any = {"messages": [{"role": "user", "content": "hi"}]}


async def test_a_chat_request_to_a_responses_only_model_is_a_400_naming_why_without_a_call() -> None:
    routed, called = await _route("deep", CHAT_REQUEST, None)
    status, _, body = answer_of(routed, "rid")
    error = msgspec.json.decode(body)["error"]
    assert called == [] and status == 400 and error["code"] == "unsupported_by_providers"
    assert "`api: responses`" in error["message"] and "/v1/responses" in error["message"]
    assert error["param"] == "model"


async def test_a_responses_request_is_sent_as_sent_to_the_responses_offer() -> None:
    sent = {"model": "deep", "input": "hi", "provider": {"sort": "price"}, "store": False}
    native = Native(surface=RESPONSES, body=msgspec.json.encode(sent), headers=(("openai-beta", "b"),))
    routed, called = await _route("deep", CHAT_REQUEST, native)
    assert called == ["oai.test/v1/responses"]
    assert routed.shape == RESPONSES and msgspec.json.decode(routed.body)["id"] == "resp_up"


async def test_a_built_in_tool_that_may_be_forced_skips_the_chat_offer() -> None:
    sent = {"model": "mixed", "input": "hi", "tools": [{"type": "web_search"}], "tool_choice": "required"}
    crossing = ("the built-in tool 'web_search' has no chat form", "tools[0].type")
    native = Native(surface=RESPONSES, body=msgspec.json.encode(sent), crossing=crossing)
    routed, called = await _route("mixed", CHAT_REQUEST, native)
    assert called == ["oai.test/v1/responses"]  # gpt/g-1 skipped, never called
    _, headers, _ = answer_of(routed, "rid")
    assert headers["x-turnout-provider"] == "oai" and headers["x-turnout-attempts"] == "1"
