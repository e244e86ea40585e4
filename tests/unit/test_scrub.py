"""The egress scrubber: known credentials in full and in fragments, credentials by shape, provider
internals, HTML, control characters; codes kept as identifiers."""

from __future__ import annotations

import pytest

from turnout.core.types import Outcome
from turnout.scrub import ADDRESS, MAX_TEXT_CHARS, REDACTED, Scrubber, redact_shapes

PLATFORM = "plat-Zq81mXv0Lr5Tn2Wk9Yb3Hc6"
BYOK = "sk-canary-9c1e7f3a5b2d4e6f8a0b1c2d3e4f5a6b"
ENDPOINT = "endpoint-key-ab12cd34ef56"


@pytest.fixture
def scrubber() -> Scrubber:
    s = Scrubber([PLATFORM])
    s.know("org:acme", [BYOK, ENDPOINT])
    return s


@pytest.mark.parametrize(
    "text",
    [
        f"Incorrect API key provided: {BYOK}.",
        f"invalid key {BYOK[:24]}",  # a 24-character prefix
        f"key ending {BYOK[-12:]} was revoked",
        f"bad credential '{PLATFORM[3:15]}'",
        f"{ENDPOINT[:8]} is unknown",  # the shortest fragment looked for
        f"{BYOK[:10]}\n{BYOK[10:30]}",  # split by a newline, each part a fragment
    ],
    ids=["full-quoted", "prefix-24", "suffix-12", "platform-middle", "fragment-8", "split"],
)
def test_known_credentials_and_their_fragments_are_removed(scrubber: Scrubber, text: str) -> None:
    clean = scrubber.text(text)
    for secret in (BYOK, PLATFORM, ENDPOINT):
        for i in range(len(secret) - 7):
            assert secret[i : i + 8] not in clean, (text, clean)
    assert REDACTED in clean


def test_a_forgotten_org_is_no_longer_looked_for(scrubber: Scrubber) -> None:
    scrubber.update({}, forgotten=["org:acme"])
    assert ENDPOINT[:12] in scrubber.text(f"x {ENDPOINT[:12]} y")
    assert PLATFORM[:12] not in scrubber.text(f"x {PLATFORM[:12]} y")


def test_extra_credentials_count_for_one_call() -> None:
    assert "abcdefgh1234" not in Scrubber().text("key abcdefgh1234 rejected", extra=["zzabcdefgh1234zz"])


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Incorrect API key provided: sk-unknownkey0123456789.", "sk-unknownkey0123456789"),
        ("API key provided: Qw9rTy7uIo5pAs3dFg1h", "Qw9rTy7uIo5pAs3dFg1h"),
        ("Authorization: Bearer whatever.token.here", "whatever.token.here"),
        ("calling with api_key=plainsecretvalue", "plainsecretvalue"),
        ('{"x-api-key": "k-123456"}', "k-123456"),
        ("see https://generativelanguage.googleapis.com/v1/models?key=AIzaSyAbc", "AIzaSyAbc"),
        ("GET /v1/models?api_key=abcd1234 HTTP/1.1", "abcd1234"),
        ("GET /v1/models?foo=bar HTTP/1.1", "foo=bar"),
        ("https://user:pass@host.example/v1", "user:pass"),
        ("key AIzaSyD-abcdefghijklmnopqrstuvwxyz01234 invalid", "AIzaSyD-abcdefghijklmnopqrstuvwxyz01234"),
        ("token xAi9Rk2Lm4Np6Qr8St0Uv2Wx4Yz6Ab8Cd0Ef2Gh", "xAi9Rk2Lm4Np6Qr8St0Uv2Wx4Yz6Ab8Cd0Ef2Gh"),
        ("tk-AbCdEfGh12 is revoked", "tk-AbCdEfGh12"),
        ("jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abc", "eyJhbGciOiJIUzI1"),
    ],
    ids=[
        "api-key-provided-sk",
        "api-key-provided-any",
        "bearer",
        "name-equals",
        "json-x-api-key",
        "url-query",
        "request-line-query",
        "any-query",
        "userinfo",
        "google-shape",
        "base64-run",
        "gateway-shape",
        "jwt",
    ],
)
def test_credentials_are_recognised_by_shape(text: str, secret: str) -> None:
    assert secret not in redact_shapes(text)
    assert secret not in Scrubber().text(text)


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 4096 is above the model's limit",
        "This model's maximum context length is 8192 tokens",
        "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min",
        "request 9c1e7f3a5b2d4e6f8a0b1c2d3e4f5a6b failed",
        "model meta-llama/Llama-3.1-405B-Instruct-Turbo is overloaded",
        "insufficient_quota",
    ],
    ids=["max-tokens", "context-length", "rate-limit", "hex-request-id", "model-path", "code-word"],
)
def test_ordinary_provider_wording_is_kept(text: str) -> None:
    assert Scrubber([PLATFORM]).text(text) == text


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (
            "Cannot connect to host api.example.com:443 ssl:default [Connect call failed ('44.1.2.3', 443)]",
            ["44.1.2.3", ":443"],
        ),
        ("upstream connect error: 10.0.0.5:8080 refused", ["10.0.0.5", "8080"]),
        ("resolves to fd00::1 and [2001:db8::7]:8443", ["fd00::1", "2001:db8::7", "8443"]),
    ],
    ids=["aiohttp-connect", "envoy", "ipv6"],
)
def test_addresses_and_ports_are_removed(text: str, gone: list[str]) -> None:
    clean = Scrubber().text(text)
    assert ADDRESS in clean
    for piece in gone:
        assert piece not in clean


def test_an_html_page_becomes_a_short_summary() -> None:
    page = "<html><head><title>502 Bad Gateway</title></head><body>nginx at 10.1.2.3</body></html>"
    assert Scrubber().text(page, status=502) == "upstream returned an HTML page (status 502)"
    assert Scrubber().text("<!DOCTYPE html>\n<p>x") == "upstream returned an HTML page"


def test_control_characters_and_length_are_bounded() -> None:
    clean = Scrubber().text("bad\r\nInjected: header\x00" + "x" * 1000)
    assert "\r" not in clean and "\n" not in clean and "\x00" not in clean
    assert len(clean) == MAX_TEXT_CHARS and clean.endswith("…")


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        ("invalid_api_key", "invalid_api_key"),
        (f"invalid_api_key:{PLATFORM}", "invalid_api_key"),
        (PLATFORM, None),
        ("rate_limit_exceeded", "rate_limit_exceeded"),
        ("bad code\r\nx", "bad"),
        ("", ""),
        (None, None),
    ],
    ids=["plain", "with-key", "only-key", "rate-limit", "crlf", "empty", "none"],
)
def test_codes_keep_only_their_leading_identifier(code: str | None, kept: str | None) -> None:
    assert Scrubber([PLATFORM]).code(code) == kept


def test_an_outcome_is_scrubbed_in_every_text_field_and_kept_when_clean(scrubber: Scrubber) -> None:
    dirty = Outcome(
        status=401,
        error_type=f"auth:{BYOK}",
        error_code=f"invalid_api_key:{PLATFORM}",
        message=f"Incorrect API key provided: {BYOK}",
    )
    clean = scrubber.outcome(dirty)
    assert clean.status == 401 and clean.error_code == "invalid_api_key" and clean.error_type == "auth"
    assert BYOK[:8] not in clean.message
    fine = Outcome(status=429, error_code="rate_limit_exceeded", message="slow down")
    assert scrubber.outcome(fine) is fine
