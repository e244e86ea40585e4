"""`turnout_client.routing`: the `x-turnout-*` headers read into a `GatewayRouting`."""

from __future__ import annotations

import httpx
import pytest

from turnout_client import GatewayRouting, parse_routing, routing_of
from turnout_client.routing import error_code_of

SERVED = {
    "x-request-id": "rid-1",
    "x-turnout-provider": "sim-west",
    "x-turnout-model": "gpt-x",
    "x-turnout-attempts": "3",
    "x-turnout-fallback": "1",
    "x-turnout-reroute": "0",
    "x-turnout-byok-fallback": "1",
    "x-turnout-plan-fallback": "1",
    "x-turnout-strategy": "cost",
    "x-turnout-idempotent-replay": "1",
}


def test_every_header_is_read() -> None:
    event = parse_routing(200, httpx.Headers(SERVED), requested_model="demo-gpt")
    assert event == GatewayRouting(
        status=200,
        request_id="rid-1",
        provider="sim-west",
        model="gpt-x",
        attempts=3,
        fallback=True,
        reroute=False,
        byok_fallback=True,
        plan_fallback=True,
        strategy="cost",
        idempotent_replay=True,
        exhausted_answer=None,
        attempt_summary=None,
        should_retry=None,
        retry_after_s=None,
        requested_model="demo-gpt",
        chain_index=0,
    )
    assert not event.chain_exhausted


@pytest.mark.parametrize(
    ("status", "headers", "exhausted"),
    [
        (502, {"x-turnout-attempts": "4", "x-should-retry": "false"}, True),
        (504, {"x-turnout-attempts": "2", "x-should-retry": "false"}, True),
        (429, {"x-turnout-attempts": "2", "x-should-retry": "true", "retry-after": "3"}, True),
        (503, {"x-turnout-attempts": "0", "retry-after": "5"}, True),
        (503, {"x-should-retry": "false", "retry-after": "1"}, False),
        (500, {"x-turnout-attempts": "3", "x-turnout-exhausted-answer": "last"}, True),
        (400, {"x-turnout-attempts": "2", "x-turnout-exhausted-answer": "original"}, True),
        (400, {"x-turnout-attempts": "1"}, False),
        (401, {}, False),
    ],
    ids=[
        "provider-failed",
        "budget-exhausted",
        "all-rate-limited",
        "circuit-open",
        "queue-full-no-attempts",
        "exhausted-answer-last",
        "exhausted-answer-original",
        "terminal-4xx",
        "unauthenticated",
    ],
)
def test_chain_exhausted_only_after_the_attempt_loop(status: int, headers: dict[str, str], exhausted: bool) -> None:
    assert parse_routing(status, httpx.Headers(headers)).chain_exhausted is exhausted


def test_plan_fallback_and_the_exhausted_answer_are_read() -> None:
    headers = {
        "x-turnout-attempts": "2",
        "x-turnout-plan-fallback": "0",
        "x-turnout-exhausted-answer": "last",
        "x-turnout-attempt-summary": "1 pa/m1 500 server 12ms, 2 pb/m2 500 server 9ms",
    }
    event = parse_routing(500, httpx.Headers(headers))
    assert (event.plan_fallback, event.exhausted_answer) == (False, "last")
    assert event.attempt_summary == headers["x-turnout-attempt-summary"]
    assert parse_routing(200, httpx.Headers({"x-turnout-plan-fallback": "1"})).as_attributes()["turnout.plan_fallback"]


def test_circuit_open_before_any_attempt_is_exhausted_too() -> None:
    assert parse_routing(503, httpx.Headers({}), error_code="circuit_open").chain_exhausted
    assert not parse_routing(503, httpx.Headers({}), error_code="queue_full").chain_exhausted


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b'{"error": {"code": "circuit_open"}}', "circuit_open"),
        (b'{"type": "error", "error": {"type": "overloaded_error", "code": "circuit_open"}}', "circuit_open"),
        (b'{"error": {"code": null}}', None),
        (b"not json", None),
        (b"[]", None),
    ],
    ids=["openai-shape", "anthropic-shape", "null", "not-json", "not-an-object"],
)
def test_error_code_of_reads_both_shapes(content: bytes, code: str | None) -> None:
    assert error_code_of(content) == code


@pytest.mark.parametrize(
    ("headers", "should_retry", "retry_after_s", "attempts"),
    [
        ({"x-should-retry": "false", "retry-after": "7"}, False, 7.0, None),
        ({"x-should-retry": "TRUE", "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, True, None, None),
        ({"retry-after": "-1", "x-turnout-attempts": "many"}, None, None, None),
    ],
    ids=["seconds", "http-date-is-not-read", "malformed"],
)
def test_retry_hints_and_malformed_values(
    headers: dict[str, str], should_retry: bool | None, retry_after_s: float | None, attempts: int | None
) -> None:
    event = parse_routing(429, httpx.Headers(headers))
    assert (event.should_retry, event.retry_after_s, event.attempts) == (should_retry, retry_after_s, attempts)


def test_routing_of_reads_a_plain_response_and_an_sdk_raw_response() -> None:
    response = httpx.Response(200, headers=SERVED)

    class Raw:
        http_response = response

    assert routing_of(response) == routing_of(Raw()) == parse_routing(200, response.headers)
    assert routing_of(object()) is None


def test_attributes_leave_out_what_is_unknown() -> None:
    attributes = parse_routing(502, httpx.Headers({"x-turnout-attempts": "2"})).as_attributes()
    assert attributes["turnout.attempts"] == 2 and attributes["http.response.status_code"] == 502
    assert "turnout.provider" not in attributes and "turnout.request_id" not in attributes
