"""The exhausted answer as the client receives it (issue #45 item 4): `answer_of` for
`fallback.on_exhausted` `last` / `original`: the upstream attempt's status and error body, the
`x-turnout-*` headers, the attempt summary in `x-turnout-attempt-summary`, `x-should-retry`."""

from __future__ import annotations

import msgspec
import pytest
from driver import drive, entry, err, plan_of

from turnout.answer import answer_of
from turnout.core.plan import Role
from turnout.core.policy import FallbackPolicy, OnExhausted, Policy, RetryPolicy
from turnout.router import RouteResult

PLAN = plan_of(
    entry("sim-a", "m-a", catalog_model="m"), entry("sim-b", "m-b", Role.PROVIDER_FALLBACK, catalog_model="m")
)
SCRIPT = {"sim-a/m-a": [err(503, "a down", type_="server_error")] * 2, "sim-b/m-b": [err(500, "b down", code="x1")]}


def answer(on_exhausted: OnExhausted) -> tuple[int, dict[str, str], dict[str, object]]:
    policy = Policy(retry=RetryPolicy(base_ms=0), fallback=FallbackPolicy(on_exhausted=on_exhausted))
    run = drive(PLAN, policy, SCRIPT)
    assert run.verdict is not None
    routed = RouteResult(body=None, verdict=run.verdict, served=run.verdict.served, records=run.records)
    status, headers, body = answer_of(routed, "rid")
    return status, headers, msgspec.json.decode(body)


@pytest.mark.parametrize(
    ("on_exhausted", "status", "error"),
    [
        ("last", 500, {"message": "b down", "type": "server_error", "param": None, "code": "x1"}),
        ("original", 503, {"message": "a down", "type": "server_error", "param": None, "code": None}),
    ],
)
def test_last_and_original_answer_with_the_upstream_error_and_the_summary_in_a_header(
    on_exhausted: OnExhausted, status: int, error: dict[str, object]
) -> None:
    got, headers, body = answer(on_exhausted)
    assert got == status and body == {"error": error}
    assert headers["x-turnout-exhausted-answer"] == on_exhausted
    assert headers["x-turnout-attempts"] == "3" and headers["x-turnout-provider"] == "sim-b"
    assert headers["x-turnout-fallback"] == "1" and headers["x-should-retry"] == "false"
    assert headers["x-turnout-attempt-summary"].startswith("1 sim-a/m-a 503 server_error ")
    assert headers["x-turnout-attempt-summary"].count(", ") == 2


def test_gateway_keeps_the_502_with_the_summary_in_the_body() -> None:
    status, headers, body = answer("gateway")
    error = body["error"]
    assert status == 502 and isinstance(error, dict) and error["code"] == "provider_failed"
    assert len(error["attempts"]) == 3
    assert "x-turnout-attempt-summary" not in headers and "x-turnout-exhausted-answer" not in headers
