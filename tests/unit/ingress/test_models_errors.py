"""`GET /v1/models` and `GET /v1/models/{id}` answer in the caller's shape, errors included
(README "The Anthropic surface"): Anthropic's `{"type": "error", "error": {"type", "message"},
"request_id"}` for a request that sends `anthropic-version`, with the 401 naming `x-api-key` as on
`/v1/messages`; OpenAI's otherwise."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from support.ingress_app import KEY, Keyring, ingress_app

ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return ingress_app()


async def _ask(app: FastAPI, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        return await client.request(method, path, headers=headers)


def _anthropic_error(response: httpx.Response) -> dict[str, Any]:
    """The answer's `error`, checked to be in Anthropic's shape with the answer's request id."""
    body: dict[str, Any] = response.json()
    assert set(body) == {"type", "error", "request_id"} and body["type"] == "error", body
    assert set(body["error"]) == {"type", "message"}, body
    assert body["request_id"] == response.headers["x-request-id"]
    error: dict[str, Any] = body["error"]
    return error


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/m"])
@pytest.mark.parametrize("key", [{}, {"x-api-key": "tk-wrong-key-000000001"}], ids=["no-key", "wrong-key"])
async def test_a_401_follows_anthropic_version_and_names_x_api_key(
    app: FastAPI, path: str, key: dict[str, str]
) -> None:
    refused = await _ask(app, "GET", path, {**ANTHROPIC, **key})
    assert refused.status_code == 401
    error = _anthropic_error(refused)
    assert error["type"] == "authentication_error" and "`x-api-key: <key>`" in error["message"]
    on_messages = await _ask(app, "POST", "/v1/messages", {**ANTHROPIC, **key})  # the same refusal there
    assert _anthropic_error(on_messages) == error
    openai = await _ask(app, "GET", path, key)
    assert openai.status_code == 401 and openai.json()["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    ("method", "path", "status", "etype"),
    [
        ("GET", "/v1/models/no-such-model", 404, "not_found_error"),
        ("GET", "/v1/models/", 404, "not_found_error"),
        ("POST", "/v1/models", 405, "invalid_request_error"),
    ],
    ids=["unknown-model", "no-id", "wrong-method"],
)
async def test_other_errors_of_the_models_routes_follow_anthropic_version(
    app: FastAPI, method: str, path: str, status: int, etype: str
) -> None:
    anthropic = await _ask(app, method, path, {**ANTHROPIC, "x-api-key": KEY})
    assert anthropic.status_code == status and _anthropic_error(anthropic)["type"] == etype
    openai = await _ask(app, method, path, {"x-api-key": KEY})
    assert openai.status_code == status and "code" in openai.json()["error"]


async def test_a_key_before_the_keys_were_read_is_503_in_anthropics_shape(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.state.turnout, "keyring", Keyring(loaded=False))
    unavailable = await _ask(app, "GET", "/v1/models", {**ANTHROPIC, "x-api-key": KEY})
    assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == "1"
    assert _anthropic_error(unavailable)["type"] == "overloaded_error"


async def test_a_known_key_gets_the_models_in_the_callers_shape(app: FastAPI) -> None:
    anthropic = (await _ask(app, "GET", "/v1/models", {**ANTHROPIC, "x-api-key": KEY})).json()
    assert anthropic["data"][0]["type"] == "model" and anthropic["has_more"] is False
    assert (await _ask(app, "GET", "/v1/models", {"x-api-key": KEY})).json()["object"] == "list"
