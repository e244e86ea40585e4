"""`turnout_client.routing`: the `x-turnout-*` headers read into a `GatewayRouting`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from turnout_client import GatewayRouting, parse_routing, routing_of
from turnout_client.routing import error_code_of

CASES = json.loads((Path(__file__).resolve().parents[2] / "data" / "client_routing_cases.json").read_text())["cases"]
"""Shared with the TypeScript helper's tests (clients/typescript/test/routing.test.ts)."""
SERVED = CASES[0]["headers"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_headers_read_as_both_helpers_read_them(case: dict[str, Any]) -> None:
    event = parse_routing(case["status"], httpx.Headers(case["headers"]), error_code=case["error_code"])
    fields = {name: getattr(event, name) for name in case["expect"]}
    assert fields == case["expect"]


def test_every_field_is_in_the_shared_table() -> None:
    assert set(CASES[0]["expect"]) | {"requested_model", "chain_index"} == {
        f.name for f in dataclasses.fields(GatewayRouting)
    } | {"chain_exhausted"}


def test_the_request_side_fields_come_from_the_caller() -> None:
    event = parse_routing(200, httpx.Headers(SERVED), requested_model="demo-gpt", chain_index=2)
    assert (event.requested_model, event.chain_index) == ("demo-gpt", 2)
    assert parse_routing(200, httpx.Headers(SERVED)).as_attributes()["turnout.plan_fallback"] is True


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
