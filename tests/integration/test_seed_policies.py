"""The seeds' policies through the whole fleet with the official `openai` SDK (issue #45 items
2, 4, 5): a pinned `provider/model` confines the plan (seed 001), the exhausted answer
(`fallback.on_exhausted`: seed 000's "error from the last attempt", seed 003's "original error"),
seed 003's default chain under raised operator ceilings, and seed 002's policy example verbatim.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
import redis

from support.gateway import BREAKER_OFF, SIM_PROVIDERS, Gateway, running_gateway, template_flow
from turnout.state import keys

pytestmark = pytest.mark.integration

KEY = "tk-seed-main-00000000001"
KEY_OPEN = "tk-seed-pinned-open-0001"
KEY_MESH = "tk-seed-mesh-00000000001"
KEY_MESH_WORKED = "tk-seed-mesh-worked-0001"
KEY_LAST = "tk-seed-last-00000000001"
KEY_ORIGINAL = "tk-seed-original-0000001"
KEY_EMPRYO = "tk-seed-empryo-000000001"

MESH_POLICY: dict[str, Any] = {
    "retry": {
        "max_retries": 3,
        "retry_on_status": [429, 502, 503, 504],
        "base_ms": 500,
        "max_ms": 30000,
        "respect_retry_after": True,
        "per_attempt_timeout_ms": 60000,
    },
    "fallback": {
        "enabled": True,
        "cross_provider_same_model": True,
        "models": ["anthropic/claude-sonnet-5"],
        "backoff_ms": 200,
        "on_status": [502, 503, 504],
    },
    "budget": {"max_attempts": 6, "max_total_latency_ms": 180000},
}
"""seed 002's "Per-key routing policy" example, verbatim ."""
MESH_WORKED = {**MESH_POLICY, "retry": {**MESH_POLICY["retry"], "max_retries": 1}, "budget": {"max_attempts": 4}}
"""The seed's worked example: `retry.max_retries = 1`, `budget.max_attempts = 4`."""
EMPRYO = {
    "retry": {"max_retries": 3, "fallback_target_retries": 3, "base_ms": 0},
    "fallback": {"max_cycles": 3},
    "budget": {"max_attempts": 36},
}
"""seed 003's defaults : `maxTransientRetries` 3 on every model of the chain, 3 cycles:
3 cycles × 3 models × (1 + 3) attempts = 36 (no backoff here, to keep the test short)."""


KEYS = {"key": KEY, "key_open": KEY_OPEN, "key_mesh": KEY_MESH, "key_mesh_worked": KEY_MESH_WORKED}
KEYS |= {"key_last": KEY_LAST, "key_original": KEY_ORIGINAL, "key_empryo": KEY_EMPRYO}
"""Each key's template field (`{key_open}`) and value, written into CONFIG."""


CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  pin-m1: {{order: priority, offers: [{{provider: sim-a, model: "pn1-a~503"}}, {{provider: sim-b, model: pn1-b}}]}}
  pin-m4: {{offers: [{{provider: sim-a, model: "pn4-a~503"}}]}}
  pin-m2: {{offers: [{{provider: sim-b, model: pn2-b}}]}}
  pin-o1: {{order: priority, offers: [{{provider: sim-a, model: "po1-a~503"}}, {{provider: sim-b, model: po1-b}}]}}
  pin-o4: {{offers: [{{provider: sim-a, model: "po4-a~503"}}]}}
  pin-o2: {{offers: [{{provider: sim-b, model: po2-b}}]}}
  mesh: {{order: priority, offers: [{{provider: sim-a, model: "mesh-a~503"}}, {{provider: sim-b, model: mesh-b}}]}}
  mesh-worked: {{order: priority, offers: [{{provider: sim-a, model: "mw-a~503"}}, {{provider: sim-b, model: mw-b}}]}}
  mesh-401: {{order: priority, offers: [{{provider: sim-a, model: "m401-a~401"}}, {{provider: sim-b, model: m401-b}}]}}
  mesh-down: {{order: priority, offers: [{{provider: sim-a, model: "md-a~503"}}, {{provider: sim-b, model: "md-b~502"}}]}}
  anthropic/claude-sonnet-5: {{offers: [{{provider: sim-b, model: cs5}}]}}
  ex: {{order: priority, offers: [{{provider: sim-a, model: "ex-a~503"}}, {{provider: sim-b, model: "ex-b~500"}}]}}
  wide: {{order: priority, offers: [{{provider: sim-a, model: "wd-a~503"}}, {{provider: sim-b, model: wd-b}}, {{provider: sim-a, model: wd-c}}]}}
  emp-1: {{offers: [{{provider: sim-a, model: "e1~503"}}]}}
  emp-2: {{offers: [{{provider: sim-a, model: "e2~503"}}]}}
  emp-3: {{offers: [{{provider: sim-b, model: "e3~503"}}]}}
policy:
  retry: {{base_ms: 250, max_ms: 4000}}
ceilings: {{max_retries: 6, max_attempts: 36, max_total_latency_ms: 180000, max_cycles: 3, max_offers: 20}}
"""
    + BREAKER_OFF
    + """
orgs:
  acme:
    settings:
      fallbacks: {{pin-m1: [pin-m4, pin-m2], pin-o1: [pin-o4, pin-o2], emp-1: [emp-2, emp-3], wide: [pin-m2]}}
    keys:
      - {{name: main, key: {key}}}
      - {{name: open, key: {key_open}, settings: {{policy: {{pinned: {{allow_other_providers: true}}}}}}}}
      - {{name: mesh, key: {key_mesh}, settings: {{policy: MESH}}}}
      - {{name: mesh-worked, key: {key_mesh_worked}, settings: {{policy: MESH_WORKED}}}}
      - {{name: last, key: {key_last}, settings: {{policy: {{retry: {{base_ms: 0}}, fallback: {{on_exhausted: last}}}}}}}}
      - {{name: original, key: {key_original}, settings: {{policy: {{retry: {{base_ms: 0}}, fallback: {{on_exhausted: original}}}}}}}}
      - {{name: empryo, key: {key_empryo}, settings: {{policy: EMPRYO}}}}
""".replace("MESH_WORKED", template_flow(MESH_WORKED))
    .replace("MESH", template_flow(MESH_POLICY))
    .replace("EMPRYO", template_flow(EMPRYO))
)
for _name, _key in KEYS.items():
    CONFIG = CONFIG.replace("{" + _name + "}", _key)
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with running_gateway(CONFIG) as gw:
        yield gw


def _create(gw: Gateway, model: str, key: str) -> dict[str, str]:
    raw = gw.client(key).chat.completions.with_raw_response.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    return dict(raw.headers)


def _error(gw: Gateway, model: str, key: str) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        gw.client(key).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    return info.value


def _statuses(gw: Gateway, model: str) -> list[object]:
    return [e["status"] for e in gw.sim_log(model)]


# ------------------------------------------------------------------ item 2: pinned means pinned


def test_a_pinned_request_never_leaves_its_provider(gateway: Gateway) -> None:
    """seed 001: a pinned `provider/model` is tried on that provider's offers only. Before: pa,
    pa, pa/m4, then m2 on pb; now pa, pa, pa/m4 and the gateway's 502."""
    error = _error(gateway, "sim-a/pin-m1", KEY)
    assert error.status_code == 502 and error.response.headers["x-turnout-attempts"] == "3"
    assert _statuses(gateway, "pn1-a~503") == [503, 503]
    assert _statuses(gateway, "pn4-a~503") == [503]
    assert gateway.sim_log("pn2-b") == [] and gateway.sim_log("pn1-b") == []


def test_allow_other_providers_lets_fallback_models_use_any_provider(gateway: Gateway) -> None:
    headers = _create(gateway, "sim-a/pin-o1", KEY_OPEN)
    assert (headers["x-turnout-provider"], headers["x-turnout-model"]) == ("sim-b", "po2-b")
    assert headers["x-turnout-attempts"] == "4" and headers["x-turnout-fallback"] == "1"
    assert gateway.sim_log("po1-b") == []  # the requested model stays pinned


# ------------------------------------------------------------------ seed 002's policy example


def test_mesh_policy_example_retries_the_primary_then_the_second_provider_serves(gateway: Gateway) -> None:
    """`max_retries` 3, 503 in `retry_on_status`: four attempts on the primary, then the same
    model on the second provider (503 in `on_status`) answers 200: five attempts."""
    headers = _create(gateway, "mesh", KEY_MESH)
    assert _statuses(gateway, "mesh-a~503") == [503, 503, 503, 503]
    assert _statuses(gateway, "mesh-b") == [200]
    assert (headers["x-turnout-attempts"], headers["x-turnout-fallback"]) == ("5", "1")
    assert headers["x-turnout-provider"] == "sim-b"


def test_mesh_worked_example_three_attempts_served_by_the_second_provider(gateway: Gateway) -> None:
    """The seed's worked example: 503, 503, then 200 on the second provider: 3 attempts,
    fallback reported; had attempt 1 been a 401, one attempt and a 401."""
    headers = _create(gateway, "mesh-worked", KEY_MESH_WORKED)
    assert _statuses(gateway, "mw-a~503") == [503, 503] and _statuses(gateway, "mw-b") == [200]
    assert (headers["x-turnout-attempts"], headers["x-turnout-fallback"]) == ("3", "1")
    error = _error(gateway, "mesh-401", KEY_MESH_WORKED)
    assert error.status_code == 401 and error.response.headers["x-turnout-attempts"] == "1"
    assert gateway.sim_log("m401-b") == []


def test_mesh_policy_example_falls_to_its_fallback_model_within_six_attempts(gateway: Gateway) -> None:
    """Both providers of the model fail (503 ×4, 502): `fallback.models` serves, the sixth
    attempt, `budget.max_attempts` 6."""
    headers = _create(gateway, "mesh-down", KEY_MESH)
    assert _statuses(gateway, "md-a~503") == [503] * 4 and _statuses(gateway, "md-b~502") == [502]
    assert (headers["x-turnout-model"], headers["x-turnout-attempts"]) == ("cs5", "6")


# ------------------------------------------------------------------ item 4: the exhausted answer


@pytest.mark.parametrize(
    ("key", "status", "words", "answer"),
    [(KEY, 502, "No provider could serve", None), (KEY_LAST, 500, "", "last"), (KEY_ORIGINAL, 503, "", "original")],
    ids=["gateway", "last", "original"],
)
def test_the_exhausted_answer_on_chat(gateway: Gateway, key: str, status: int, words: str, answer: str | None) -> None:
    error = _error(gateway, "ex", key)
    headers = error.response.headers
    body = error.response.json()["error"]
    assert error.status_code == status and words in body["message"]
    assert headers["x-turnout-attempts"] == "3" and headers["x-turnout-provider"] == "sim-b"
    assert headers["x-should-retry"] == "false"
    assert headers.get("x-turnout-exhausted-answer") == answer
    if answer is None:
        assert len(body["attempts"]) == 3
    else:
        assert "attempts" not in body
        summary = headers["x-turnout-attempt-summary"]
        assert summary.startswith("1 sim-a/ex-a~503 503 server_error ") and " 3 sim-b/ex-b~500 500 " in summary


@pytest.mark.parametrize(
    ("key", "status", "kind"), [(KEY_LAST, 500, "api_error"), (KEY_ORIGINAL, 503, "overloaded_error")]
)
def test_the_exhausted_answer_on_messages_is_anthropic_shaped(
    gateway: Gateway, key: str, status: int, kind: str
) -> None:
    answer = httpx.post(
        f"{gateway.base_url}/v1/messages",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        json={"model": "ex", "max_tokens": 8, "messages": MESSAGES},
        timeout=30,
    )
    body = answer.json()
    assert answer.status_code == status and body["type"] == "error" and body["error"]["type"] == kind
    assert answer.headers["x-turnout-attempts"] == "3" and "x-turnout-attempt-summary" in answer.headers


def test_the_exhausted_answer_of_a_stream_that_never_started(gateway: Gateway) -> None:
    """Nothing was streamed before every attempt failed: the answer is the same upstream error."""
    with pytest.raises(openai.APIStatusError) as info:
        gateway.client(KEY_LAST).chat.completions.create(model="ex", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert info.value.status_code == 500
    assert info.value.response.headers["x-turnout-exhausted-answer"] == "last"


def test_the_exhausted_answer_on_responses(gateway: Gateway) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        gateway.client(KEY_ORIGINAL).responses.create(model="ex", input="hello")
    assert info.value.status_code == 503
    assert info.value.response.headers["x-turnout-exhausted-answer"] == "original"


# ------------------------------------------------------------------ item 5: seed 003's default chain


def test_empryo_default_chain_three_cycles_of_four_attempts_per_model(gateway: Gateway) -> None:
    """primary → retry 3 → fallback[0] → retry 3 → fallback[1] → retry 3 → primary (cycle 2) …
    → after 3 cycles, the original error: 36 attempts under `ceilings.max_attempts` 36."""
    with pytest.raises(openai.APIStatusError) as info:
        gateway.client(KEY_EMPRYO).chat.completions.create(model="emp-1", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.status_code == 502 and info.value.response.headers["x-turnout-attempts"] == "36"
    for model in ("e1~503", "e2~503", "e3~503"):
        assert _statuses(gateway, model) == [503] * 12


# ------------------------------------------------------------------ item 6: considered offers


def _ended_rows(gw: Gateway, request_id: str) -> list[dict[str, Any]]:
    with redis.Redis.from_url(gw.redis_url) as store:
        entries = cast(list[Any], store.xrange(keys.RECORDS_STREAM))
    rows = [json.loads(fields[b"r"]) for _, fields in entries]
    return sorted(
        (r for r in rows if r.get("request_id") == request_id and r.get("phase") == "ended"), key=lambda r: r["attempt"]
    )


def test_the_records_list_the_offers_considered_and_not_attempted(gateway: Gateway) -> None:
    """seed 001: a request's detail names the provider that served it and the other offers
    considered. The plan holds three offers (`plan.max_offers`); the fallback model's is
    capped out; the third offer is not reached once the second serves."""
    headers = _create(gateway, "wide", KEY)
    assert (headers["x-turnout-provider"], headers["x-turnout-attempts"]) == ("sim-b", "3")
    deadline = time.monotonic() + 10.0
    while len(rows := _ended_rows(gateway, headers["x-request-id"])) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    considered = [(c["provider"], c["model"], c["reason"]) for c in rows[-1]["considered"]]
    assert considered == [("sim-a", "wd-c", "not_reached"), ("sim-b", "pn2-b", "capped")]
    assert [(c["model"], c["reason"]) for c in rows[0]["considered"]] == [
        ("wd-b", "not_reached"),
        ("wd-c", "not_reached"),
        ("pn2-b", "capped"),
    ]
