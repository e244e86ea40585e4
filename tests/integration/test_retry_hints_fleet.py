"""The provider's `x-should-retry` through the whole fleet, with the official openai SDK as the
client: a 503 saying `false` is sent once to its target and the fallback serves; one saying
`true` on a status the policy does not retry is re-sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai.types.chat import ChatCompletionMessageParam

from support.gateway import ACME_ORG, BREAKER_OFF, KEY, SIM_PROVIDERS, Gateway, running_gateway

pytestmark = pytest.mark.integration

CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  no-retry:
    order: priority
    offers: [{{provider: sim-a, model: "nr~503nr"}}, {{provider: sim-b, model: nr-b}}]
  yes-retry:
    order: priority
    offers: [{{provider: sim-a, model: "sr~501sr,200"}}, {{provider: sim-b, model: sr-b}}]
"""
    + BREAKER_OFF
    + ACME_ORG
)
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with running_gateway(CONFIG, key=KEY) as gateway:
        yield gateway


def test_a_503_saying_do_not_retry_is_one_call_and_the_fallback_serves(gw: Gateway) -> None:
    for _ in range(3):
        raw = gw.client().chat.completions.with_raw_response.create(model="no-retry", messages=HELLO)
        assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-attempts"]) == ("sim-b", "2")
    assert [e["status"] for e in gw.sim_log("nr~503nr")] == [503] * 3  # one call per request


def test_a_501_saying_retry_is_sent_again_to_the_same_target(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="yes-retry", messages=HELLO)
    assert (raw.headers["x-turnout-provider"], raw.headers["x-turnout-attempts"]) == ("sim-a", "2")
    assert [e["status"] for e in gw.sim_log("sr~501sr,200")] == [501, 200]
