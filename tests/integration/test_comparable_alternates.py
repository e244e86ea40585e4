"""Comparable alternates through the whole fleet with the official `openai` SDK (issue #45 item 7;
seed 002: a comparable alternate model may serve, and a model list may constrain the
candidates). Every offer of the asked model and its configured fallback fail (the simulator's
`~503`); a model of the same `class` serves; a model of another class never does; `fallback.only`
keeps the alternates to the models it lists; a pinned request and a policy without `comparable`
get none. The records mark the alternate, and the Activity badges count every extra attempt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, cast

import openai
import pytest
import redis

from support.gateway import BREAKER_OFF, SIM_PROVIDERS, Gateway, running_gateway
from turnout.state import keys
from turnout_ingress.ui.activity import badges

pytestmark = pytest.mark.integration

KEY = "tk-alt-comparable-0000001"
KEY_ONLY = "tk-alt-only-000000000001"
KEY_OFF = "tk-alt-off-0000000000001"

CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  big:
    class: frontier-chat
    order: priority
    offers: [{{provider: sim-a, model: "big-a~503"}}, {{provider: sim-b, model: "big-b~503"}}]
  configured: {{offers: [{{provider: sim-a, model: "cfg-a~503"}}]}}
  small-ok: {{class: small-chat, offers: [{{provider: sim-b, model: small-ok}}]}}
  alt-1: {{class: frontier-chat, offers: [{{provider: sim-b, model: alt-1}}]}}
  alt-2: {{class: frontier-chat, offers: [{{provider: sim-a, model: alt-2}}]}}
  mini: {{class: small-chat, offers: [{{provider: sim-a, model: "mini-a~503"}}]}}
policy:
  retry: {{max_retries: 1, base_ms: 0}}
  plan: {{max_offers: 6}}
"""
    + BREAKER_OFF
    + """
orgs:
  acme:
    settings:
      fallbacks: {{big: [configured]}}
    keys:
      - {{name: main, key: KEY, settings: {{policy: {{fallback: {{comparable: true}}}}}}}}
      - {{name: only, key: KEY_ONLY, settings: {{policy: {{fallback: {{comparable: true, only: [alt-2]}}}}}}}}
      - {{name: plain, key: KEY_OFF}}
""".replace("KEY_ONLY", KEY_ONLY)
    .replace("KEY_OFF", KEY_OFF)
    .replace("KEY", KEY)
)
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with running_gateway(CONFIG) as gw:
        yield gw


def _calls(gw: Gateway) -> dict[str, int]:
    """Calls the simulator received so far, per upstream model of CONFIG."""
    names = ("big-a~503", "big-b~503", "cfg-a~503", "small-ok", "alt-1", "alt-2", "mini-a~503")
    return {name: len(gw.sim_log(name)) for name in names}


def _made(gw: Gateway, before: dict[str, int]) -> dict[str, int]:
    """Calls since `before`, the models called at least once."""
    return {name: n - before[name] for name, n in _calls(gw).items() if n > before[name]}


def _rows(gw: Gateway, request_id: str, count: int) -> list[dict[str, Any]]:
    """The request's `count` ended attempt rows, by attempt (waits up to 10 s for the flush)."""
    deadline = time.monotonic() + 10.0
    while True:
        with redis.Redis.from_url(gw.redis_url) as store:
            entries = cast(list[Any], store.xrange(keys.RECORDS_STREAM))
        rows = [json.loads(fields[b"r"]) for _, fields in entries]
        mine = [r for r in rows if r.get("request_id") == request_id and r.get("phase") == "ended"]
        if len(mine) >= count or time.monotonic() > deadline:
            return sorted(mine, key=lambda r: r["attempt"])
        time.sleep(0.05)


def test_an_alternate_of_the_same_class_serves_after_every_configured_target_failed(gateway: Gateway) -> None:
    before = _calls(gateway)
    raw = gateway.client(KEY).chat.completions.with_raw_response.create(model="big", messages=MESSAGES)  # type: ignore[arg-type]
    headers = raw.headers
    assert raw.parse().choices[0].message.content
    # the asked model on both providers (the first retried once), its configured fallback, then
    # the first model of its class in catalog order; another class's model is never called
    assert _made(gateway, before) == {"big-a~503": 2, "big-b~503": 1, "cfg-a~503": 1, "alt-1": 1}
    assert (headers["x-turnout-model"], headers["x-turnout-provider"]) == ("alt-1", "sim-b")
    assert (headers["x-turnout-attempts"], headers["x-turnout-fallback"], headers["x-turnout-comparable"]) == (
        "5",
        "1",
        "1",
    )
    rows = _rows(gateway, headers["x-request-id"], 5)
    assert [(r["served_model"], r["role"], r["is_comparable"]) for r in rows] == [
        ("big-a~503", "primary", False),
        ("big-a~503", "primary", False),
        ("big-b~503", "provider_fallback", False),
        ("cfg-a~503", "model_fallback", False),
        ("alt-1", "comparable_alternate", True),
    ]
    assert badges(rows) == ("Retried ×4", "Provider fallback", "Model fallback", "Comparable alternate")


def test_a_stream_is_served_by_the_alternate_too(gateway: Gateway) -> None:
    before = _calls(gateway)
    with gateway.client(KEY).chat.completions.with_streaming_response.create(
        model="big",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    ) as response:
        assert response.headers["x-turnout-comparable"] == "1"
        assert response.headers["x-turnout-model"] == "alt-1"
        text = "".join(response.iter_lines())
    assert "data:" in text
    assert _made(gateway, before)["alt-1"] == 1


def test_the_other_class_keeps_to_its_own(gateway: Gateway) -> None:
    before = _calls(gateway)
    raw = gateway.client(KEY).chat.completions.with_raw_response.create(model="mini", messages=MESSAGES)  # type: ignore[arg-type]
    assert _made(gateway, before) == {"mini-a~503": 2, "small-ok": 1}
    assert (raw.headers["x-turnout-model"], raw.headers["x-turnout-comparable"]) == ("small-ok", "1")


def test_only_keeps_the_fallbacks_to_the_models_it_lists(gateway: Gateway) -> None:
    """`fallback.only: [alt-2]`: the configured fallback and alt-1 are left out; alt-2 serves."""
    before = _calls(gateway)
    raw = gateway.client(KEY_ONLY).chat.completions.with_raw_response.create(model="big", messages=MESSAGES)  # type: ignore[arg-type]
    assert _made(gateway, before) == {"big-a~503": 2, "big-b~503": 1, "alt-2": 1}
    assert (raw.headers["x-turnout-model"], raw.headers["x-turnout-attempts"]) == ("alt-2", "4")


def test_without_comparable_the_plan_ends_with_its_configured_fallback(gateway: Gateway) -> None:
    before = _calls(gateway)
    with pytest.raises(openai.APIStatusError) as info:
        gateway.client(KEY_OFF).chat.completions.create(model="big", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.status_code == 502 and info.value.response.headers["x-turnout-attempts"] == "4"
    assert _made(gateway, before) == {"big-a~503": 2, "big-b~503": 1, "cfg-a~503": 1}


def test_a_pinned_request_never_gets_an_alternate(gateway: Gateway) -> None:
    """`sim-a/big` keeps the plan on sim-a: alt-2 is on sim-a too, and still never called."""
    before = _calls(gateway)
    with pytest.raises(openai.APIStatusError) as info:
        gateway.client(KEY).chat.completions.create(model="sim-a/big", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.status_code == 502 and info.value.response.headers["x-turnout-attempts"] == "3"
    assert _made(gateway, before) == {"big-a~503": 2, "cfg-a~503": 1}
