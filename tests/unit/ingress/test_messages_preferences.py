"""`POST /v1/messages` reads the body's `provider` object as the chat route does: the
request's routing preferences, checked with the field named (in Anthropic's error
shape), and never part of the request sent upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.malformed_provider import MALFORMED_PROVIDERS
from turnout.core.preferences import MaxPrice, Preferences
from turnout.errors import RequestRejected
from turnout_ingress.surfaces.messages.native import carried
from turnout_ingress.surfaces.messages.routes import rejected
from turnout_ingress.surfaces.messages.wire import parse_messages_request, to_openai_request

BODY: dict[str, Any] = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def _raw(provider: Any) -> bytes:
    return json.dumps({**BODY, "provider": provider}).encode()


@pytest.mark.parametrize(
    ("provider", "preferences"),
    [
        ({"order": ["sim-b"], "allow_fallbacks": False}, Preferences(order=("sim-b",), allow_fallbacks=False)),
        ({"only": ["sim-a", "sim-b"]}, Preferences(only=("sim-a", "sim-b"))),
        (
            {"ignore": ["sim-a"], "sort": "price", "max_price": {"prompt": 1}},
            Preferences(ignore=("sim-a",), sort="price", max_price=MaxPrice(prompt=1.0)),
        ),
    ],
    ids=["order-no-fallbacks", "only", "ignore-sort-max-price"],
)
def test_the_provider_object_is_the_requests_preferences_and_stays_out_of_the_upstream_body(
    provider: dict[str, Any], preferences: Preferences
) -> None:
    body, got, native = carried(_raw(provider), ())
    assert got == preferences
    assert "provider" not in body
    assert native.body == _raw(provider)  # as sent: `provider` leaves it per attempt (`native_body`)
    assert body == to_openai_request(parse_messages_request(json.dumps(BODY).encode()))


@pytest.mark.parametrize(("provider", "param"), MALFORMED_PROVIDERS)
def test_a_malformed_provider_object_is_a_400_in_anthropic_shape_naming_the_field(provider: Any, param: str) -> None:
    with pytest.raises(RequestRejected) as info:
        carried(_raw(provider), ())
    assert (info.value.status_code, info.value.param) == (400, param)
    answer = rejected(info.value, "req-1")
    assert answer.status_code == 400
    body = json.loads(bytes(answer.body))
    assert body["type"] == "error" and body["request_id"] == "req-1"
    assert body["error"]["type"] == "invalid_request_error"
    assert f"`{param}`" in body["error"]["message"]
