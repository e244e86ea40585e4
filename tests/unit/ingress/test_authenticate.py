"""`turnout_ingress.serving.validation.authenticate`: 401 for a missing or wrong key, 503 for a key that cannot be checked yet."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from starlette.requests import Request

from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.tenancy.identity import Identity
from turnout_ingress.serving.validation import authenticate

KNOWN = "tk-known-key-00000001"


class Keyring:
    """An `Authenticator` knowing `KNOWN` once `loaded`."""

    def __init__(self, *, loaded: bool) -> None:
        self._loaded = loaded
        self.identity: Identity = SimpleNamespace(org="acme", key="ci-bot")  # type: ignore[assignment]

    def authenticate(self, token: str | None) -> Identity | None:
        return self.identity if self._loaded and token == KNOWN else None

    @property
    def loaded(self) -> bool:
        return self._loaded


def request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": raw})


def test_a_known_key_is_the_caller_by_bearer_or_x_api_key() -> None:
    keyring = Keyring(loaded=True)
    assert authenticate(request({"authorization": f"Bearer {KNOWN}"}), keyring) is keyring.identity
    assert authenticate(request({"x-api-key": f" {KNOWN} "}), keyring) is keyring.identity


def test_the_caller_is_kept_on_the_request_for_a_later_refusals_row() -> None:
    sent = request({"authorization": f"Bearer {KNOWN}"})
    authenticate(sent, Keyring(loaded=True))
    assert (sent.state.org, sent.state.key) == ("acme", "ci-bot")


@pytest.mark.parametrize(
    "headers", [{}, {"authorization": "Bearer tk-wrong-key-000000001"}, {"authorization": "Bearer "}, {"x-api-key": ""}]
)
def test_a_missing_or_wrong_key_is_401_once_the_keys_were_read(headers: dict[str, str]) -> None:
    with pytest.raises(RequestRejected) as info:
        authenticate(request(headers), Keyring(loaded=True))
    assert (info.value.status_code, info.value.code) == (401, "invalid_api_key")


def test_a_key_before_the_keys_were_ever_read_is_503_with_retry_after_not_401() -> None:
    for token in (KNOWN, "tk-wrong-key-000000001"):
        with pytest.raises(GatewayUnavailable) as info:
            authenticate(request({"authorization": f"Bearer {token}"}), Keyring(loaded=False))
        assert (info.value.code, info.value.retry_after_s) == ("redis_unavailable", 1)
        assert "not read its keys yet" in info.value.message


def test_no_key_at_all_is_401_even_before_the_keys_were_read() -> None:
    with pytest.raises(RequestRejected) as info:
        authenticate(request({}), Keyring(loaded=False))
    assert info.value.status_code == 401, "no key can never be valid: nothing to wait for"
