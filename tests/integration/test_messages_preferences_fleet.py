"""Per-request preferences on `POST /v1/messages` through the whole fleet (SPEC §10), with the
official `anthropic` SDK sending the `provider` object by `extra_body`.

One ingress and one worker share Redis; the simulator serves two providers. Each model
lists `sim-a` first (`order: priority`), so a request the preferences do not steer is
served by `sim-a`: an answer from `sim-b` shows the preferences were read, on the queued
path (the worker plans with the job's preferences) and on the streaming one (the ingress
plans with them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from support.gateway import SIM_PROVIDERS, Gateway, running_gateway
from support.malformed_provider import MALFORMED_PROVIDERS

pytestmark = pytest.mark.integration

KEY = "tk-test-msg-prefs-0000001"
KEY_NO_RETRY = "tk-test-msg-prefs-noretry"
USER: Any = [{"role": "user", "content": "hello"}]

CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  mp-queued:
    order: priority
    offers: [{{provider: sim-a, model: mpq-a}}, {{provider: sim-b, model: mpq-b}}]
  mp-stream:
    order: priority
    offers: [{{provider: sim-a, model: mps-a}}, {{provider: sim-b, model: mps-b}}]
  mp-failing:
    order: priority
    offers: [{{provider: sim-a, model: "mpf-a~503"}}, {{provider: sim-b, model: mpf-b}}]
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
      - {{name: no-retry, key: {key_no_retry}, settings: {{policy: {{retry: {{max_retries: 0}}}}}}}}
"""
)

STEERED = [{"order": ["sim-b"], "allow_fallbacks": False}, {"only": ["sim-b"]}, {"ignore": ["sim-a"]}]
STEERED_IDS = ["order-no-fallbacks", "only", "ignore"]


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with running_gateway(CONFIG, env={"TURNOUT_METRICS_PORT": "0"}, key=KEY, key_no_retry=KEY_NO_RETRY) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def claude(gw: Gateway) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(base_url=gw.base_url, api_key=KEY, max_retries=0)
    yield client
    client.close()


@pytest.mark.parametrize("provider", STEERED, ids=STEERED_IDS)
def test_preferences_steer_a_queued_message(gw: Gateway, claude: anthropic.Anthropic, provider: dict[str, Any]) -> None:
    plain = claude.messages.with_raw_response.create(model="mp-queued", max_tokens=3, messages=USER)
    assert plain.headers["x-turnout-provider"] == "sim-a"  # unsteered: the model's first offer
    before = len(gw.sim_log("mpq-a"))
    raw = claude.messages.with_raw_response.create(
        model="mp-queued", max_tokens=3, messages=USER, extra_body={"provider": provider}
    )
    message = raw.parse()
    assert raw.headers["x-turnout-provider"] == "sim-b" and raw.headers["x-turnout-model"] == "mpq-b"
    assert raw.headers["x-turnout-attempts"] == "1"
    assert message.type == "message" and message.content[0].text == "tok0 tok1 tok2"  # type: ignore[union-attr]
    assert len(gw.sim_log("mpq-a")) == before  # the offer the preferences left out was never called


@pytest.mark.parametrize("provider", STEERED, ids=STEERED_IDS)
def test_preferences_steer_a_streamed_message(
    gw: Gateway, claude: anthropic.Anthropic, provider: dict[str, Any]
) -> None:
    with claude.messages.with_streaming_response.create(
        model="mp-stream", max_tokens=3, messages=USER, stream=True
    ) as plain:
        assert plain.headers["x-turnout-provider"] == "sim-a"  # unsteered: the model's first offer
    before = len(gw.sim_log("mps-a"))
    with claude.messages.with_streaming_response.create(
        model="mp-stream", max_tokens=3, messages=USER, stream=True, extra_body={"provider": provider}
    ) as response:
        assert response.headers["x-turnout-provider"] == "sim-b"
        assert response.headers["content-type"].startswith("text/event-stream")
    with claude.messages.stream(
        model="mp-stream", max_tokens=3, messages=USER, extra_body={"provider": provider}
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "tok0 tok1 tok2" and final.model == "mps-b"
    assert len(gw.sim_log("mps-a")) == before


def test_without_fallbacks_a_failing_first_offer_is_the_only_attempt(gw: Gateway) -> None:
    """`allow_fallbacks: false` and no `order`: only the first-ranked offer, so its 503
    is the answer (a 502 after one attempt), and `sim-b`'s offer is never called."""
    client = anthropic.Anthropic(base_url=gw.base_url, api_key=KEY_NO_RETRY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(
            model="mp-failing", max_tokens=3, messages=USER, extra_body={"provider": {"allow_fallbacks": False}}
        )
    client.close()
    assert info.value.status_code == 502 and info.value.response.headers["x-turnout-attempts"] == "1"
    assert info.value.response.json()["type"] == "error"
    assert (len(gw.sim_log("mpf-a~503")), len(gw.sim_log("mpf-b"))) == (1, 0)


@pytest.mark.parametrize(("provider", "param"), MALFORMED_PROVIDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["queued", "streamed"])
def test_a_malformed_provider_is_a_400_in_anthropic_shape_naming_it(
    gw: Gateway, claude: anthropic.Anthropic, provider: Any, param: str, stream: bool
) -> None:
    before = len(gw.sim_log("mpq-a")) + len(gw.sim_log("mpq-b"))
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(
            model="mp-queued", max_tokens=3, messages=USER, stream=stream, extra_body={"provider": provider}
        )
    body = info.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert f"`{param}`" in body["error"]["message"]
    assert len(gw.sim_log("mpq-a")) + len(gw.sim_log("mpq-b")) == before  # refused before any upstream call


@pytest.mark.parametrize("stream", [False, True], ids=["queued", "streamed"])
def test_preferences_that_leave_no_offer_are_a_400_in_anthropic_shape(
    gw: Gateway, claude: anthropic.Anthropic, stream: bool
) -> None:
    before = len(gw.sim_log("mpq-a")) + len(gw.sim_log("mpq-b"))
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(
            model="mp-queued", max_tokens=3, messages=USER, stream=stream, extra_body={"provider": {"only": ["sim-c"]}}
        )
    body = info.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "`provider` preferences" in body["error"]["message"]
    assert len(gw.sim_log("mpq-a")) + len(gw.sim_log("mpq-b")) == before
