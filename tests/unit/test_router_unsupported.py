"""A target whose API has no form for the request is skipped, not attempted (`SkipReason.UNSUPPORTED`).

An Anthropic provider cannot give `n` > 1 choices: a plan that starts there
goes on to the next target at once, with no attempt, no started record, no
upstream call and nothing counted against the Anthropic target's health; a
plan with no other target answers 400 naming the field, without calling
anyone.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from support.clocks import FakeClock
from support.routers import fake_router
from support.two_providers import completion
from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES
from turnout.adapters.base import Refusal
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.answer import answer_of
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.plan import RoutingSettings
from turnout.router import NullObserver, RequestInfo

CONFIG = """\
providers:
  claude: {kind: anthropic, base_url: "http://claude.test", api_key: key-c}
  gpt: {kind: openai_compatible, base_url: "http://gpt.test/v1", api_key: key-g}
models:
  chain:
    order: priority
    offers:
      - {provider: claude, model: c-1}
      - {provider: gpt, model: g-1}
  claude-only:
    offers:
      - {provider: claude, model: c-1}
"""

TWO = {"model": "chain", "n": 2, "messages": [{"role": "user", "content": "hi"}]}


async def _route(model: str, request: dict[str, Any]) -> tuple[Any, list[str], list[str]]:
    """(routed, events, breaker records): the started records and upstream calls in order, and
    the targets whose breaker heard of an outcome."""
    config = parse_config(CONFIG, env={})
    catalog = Catalog(config)
    events: list[str] = []
    counted: list[str] = []
    clock = FakeClock(0.0)
    breakers = clock.breakers(catalog)
    record = breakers.results.record

    async def spy_record(target: str, *args: Any, **kwargs: Any) -> Any:
        counted.append(target)
        return await record(target, *args, **kwargs)

    breakers.results.record = spy_record  # type: ignore[method-assign]

    class Spy(NullObserver):
        async def attempt_dispatched(self, handle: object) -> None:
            events.append("started record")

    def answer(call: httpx.Request) -> httpx.Response:
        events.append(f"upstream {call.url.host}")
        return completion("g-1")

    router = fake_router(catalog, httpx.MockTransport(answer), clock=clock, observer=Spy(), breakers=breakers)
    plan, view = await router.plan(model, RoutingSettings(), config.policy)
    info = RequestInfo(request_id="rid", org="acme", requested_model=model)
    routed = await router.route(
        {**request, "model": model}, plan=plan, view=view, policy=config.policy, time_left_s=30, info=info
    )
    return routed, events, counted


async def test_an_offer_that_cannot_express_the_request_is_skipped_for_the_next() -> None:
    routed, events, counted = await _route("chain", TWO)
    assert routed.verdict is None and routed.body is not None
    assert events == ["started record", "upstream gpt.test"]  # no record, no call for claude
    assert counted == ["gpt/g-1"]  # claude's health heard nothing
    status, headers, _ = answer_of(routed, "rid")
    assert status == 200
    assert headers["x-turnout-provider"] == "gpt" and headers["x-turnout-attempts"] == "1"


async def test_a_plan_no_offer_of_which_can_express_it_is_a_400_naming_the_field() -> None:
    routed, events, counted = await _route("claude-only", TWO)
    assert events == [] and counted == []  # nobody was called, nothing counted
    status, headers, body = answer_of(routed, "rid")
    error = msgspec.json.decode(body)["error"]
    assert status == 400 and headers["x-turnout-attempts"] == "0" and headers["x-should-retry"] == "false"
    assert error["type"] == "invalid_request_error" and error["code"] == "unsupported_by_providers"
    assert error["param"] == "n" and error["attempts"] == []
    assert error["message"] == (
        "No provider of `claude-only` can take this request as sent (none was called): "
        "claude: `n` greater than 1 is not supported by Anthropic providers."
    )


async def test_a_request_the_target_can_express_is_sent_to_it() -> None:
    _, events, counted = await _route("chain", {"n": 1, "messages": [{"role": "user", "content": "hi"}]})
    assert events[:2] == ["started record", "upstream claude.test"] and counted[0] == "claude/c-1"


def test_only_the_anthropic_family_refuses_and_only_what_it_cannot_express() -> None:
    plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert ANTHROPIC_MESSAGES.refusal(plain, "c-1") is None
    assert ANTHROPIC_MESSAGES.refusal({**plain, "n": 1}, "c-1") is None
    assert ANTHROPIC_MESSAGES.refusal({**plain, "n": 3}, "c-1") == Refusal(
        "`n` greater than 1 is not supported by Anthropic providers.", "n"
    )
    odd_role = {**plain, "messages": [{"role": "function", "content": "x"}]}
    refused = ANTHROPIC_MESSAGES.refusal(odd_role, "c-1")
    assert refused is not None and refused.param == "messages[0].role"
    assert OPENAI_CHAT.refusal({**plain, "n": 3}, "g-1") is None
