"""Rate-limit hints: how long a provider asks us to wait (SPEC §3 "Backoff").

Owns: parsing of `retry-after-ms`, `Retry-After` (RFC 9110 §10.2.3),
OpenAI-style `x-ratelimit-reset-*` Go durations, Anthropic
`anthropic-ratelimit-*-reset` RFC 3339 timestamps and "try again in 20s"
wording into one hint in seconds.

Must not import: anything outside the standard library, msgspec and
`turnout.core`; no I/O, no clock (the caller passes `now_epoch_s`), no
randomness, no asyncio.

Every function here is total: junk input yields None, never an exception.
A hint is sane when it is finite, non-negative and at most `MAX_HINT_S`
(one day); anything else is treated as absent for its source.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

__all__ = [
    "MAX_HINT_S",
    "parse_go_duration_s",
    "parse_retry_after_s",
    "retry_after_s",
]

MAX_HINT_S: Final = 86_400.0
"""Longest hint believed, in seconds (one day); longer values are ignored."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

# RFC 9110 §10.2.3: delay-seconds = 1*DIGIT. Decimals are accepted too
# (some providers send "1.5"); signs, exponents, "inf" and "nan" are not.
_DECIMAL: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")

# Go's time.ParseDuration: [+]{number unit}+ with units ns, us / µs / μs, ms,
# s, m, h; a bare "0" is allowed. Alternation order matters ("ms" before "m").
_GO_UNIT_S: Final[Mapping[str, float]] = types.MappingProxyType(
    {
        "ns": 1e-9,
        "us": 1e-6,
        "\u00b5s": 1e-6,
        "\u03bcs": 1e-6,
        "ms": 1e-3,
        "s": 1.0,
        "m": 60.0,
        "h": 3600.0,
    }
)
_GO_SEGMENT: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_GO_DURATION: Final = re.compile(r"\+?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+")

# "Please try again in 20s", "try again in 1.5 seconds", "retry after 300ms",
# "Please retry in 7.2s" (Gemini), "Please retry after 7 seconds" (Azure),
# "Please try again in 1m0.363s" (Groq), `"retryDelay": "38s"` (Google RetryInfo).
_MESSAGE_HINT: Final = re.compile(
    r"(?:(?:try again|retry)\s+(?:in|after)\s+(?:about\s+|approximately\s+|~\s*)?"
    r"|retry_?delay[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<dur>[0-9]+(?:\.[0-9]+)?\s*[a-z\u00b5\u03bc]+(?:[0-9]+(?:\.[0-9]+)?[a-z\u00b5\u03bc]+)*)"
)
_WORD_DURATION: Final = re.compile(
    r"([0-9]+(?:\.[0-9]+)?)\s*"
    r"(milliseconds?|msecs?|seconds?|secs?|minutes?|mins?|hours?|hrs?|days?)"
)
_WORD_UNIT_S: Final[tuple[tuple[str, float], ...]] = (
    ("ms", 1e-3),
    ("mil", 1e-3),
    ("s", 1.0),
    ("min", 60.0),
    ("h", 3600.0),
    ("d", 86_400.0),
)

_OPENAI_BUCKETS: Final = ("requests", "tokens")
_ANTHROPIC_BUCKETS: Final = ("requests", "tokens", "input-tokens", "output-tokens")
_ZERO: Final = re.compile(r"0+(?:\.0+)?")


def _sane(value: float | None) -> float | None:
    """The value when finite and within [0, MAX_HINT_S], else None (-0.0 → 0.0)."""
    if value is None or not math.isfinite(value) or not 0.0 <= value <= MAX_HINT_S:
        return None
    return value + 0.0


def _seconds_until(moment: datetime, now_epoch_s: float) -> float | None:
    """Seconds from `now_epoch_s` until `moment` (naive = UTC); past → 0.0."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        delta = (moment - _EPOCH).total_seconds() - float(now_epoch_s)
    except (OverflowError, TypeError, ValueError):
        return None
    if not math.isfinite(delta):
        return None
    return max(0.0, delta)


def parse_go_duration_s(text: str) -> float | None:
    """Parse a Go `time.Duration` string into seconds.

    OpenAI and Groq send `x-ratelimit-reset-requests` / `-tokens` in this form
    (`6m0s`, `20ms`, `1s`, `1h2m3.5s`, `0.5s`, `7.66s`). Units: `ns`, `us` /
    `µs`, `ms`, `s`, `m`, `h` (case-sensitive, as in Go); a bare `0` is 0.0.
    Surrounding whitespace is ignored.

    Args:
        text: the duration text.

    Returns:
        The duration in seconds (finite, >= 0; not capped), or None for junk,
        a negative duration, a number without a unit, or an overflow.
        Never raises.
    """
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text == "0" or text == "+0":
        return 0.0
    if not _GO_DURATION.fullmatch(text):
        return None
    total = 0.0
    for number, unit in _GO_SEGMENT.findall(text):
        total += float(number) * _GO_UNIT_S[unit]
    if not math.isfinite(total):
        return None
    return total


def parse_retry_after_s(value: str, now_epoch_s: float) -> float | None:
    """Parse one `Retry-After` header value into seconds (RFC 9110 §10.2.3).

    Accepts delay-seconds (`120`; decimals such as `1.5` are tolerated) or an
    HTTP-date in IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), obsolete
    RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) or asctime
    (`Sun Nov  6 08:49:37 1994`, read as UTC) form.

    Args:
        value: the header value.
        now_epoch_s: the current time, Unix epoch seconds (used for dates).

    Returns:
        Seconds to wait: finite and >= 0, not capped (a date in the past gives
        0.0). None for junk: empty, negative, exponent / `inf` / `nan`
        numbers, unparseable dates, or a non-finite `now_epoch_s` with a
        date. Never raises.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if _DECIMAL.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    if not any(ch.isalpha() for ch in text):
        return None
    try:
        moment = parsedate_to_datetime(text)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    return _seconds_until(moment, now_epoch_s)


def _parse_rfc3339_s(value: str, now_epoch_s: float) -> float | None:
    """Seconds until an RFC 3339 timestamp (Anthropic `*-reset` headers)."""
    try:
        moment = datetime.fromisoformat(value.strip().upper())
    except (ValueError, TypeError, OverflowError):
        return None
    return _seconds_until(moment, now_epoch_s)


def _lower_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names lower-cased and values stripped; non-string items dropped."""
    out: dict[str, str] = {}
    try:
        items: Iterable[tuple[object, object]] = list(headers.items())
    except (AttributeError, TypeError, ValueError):
        return out
    for key, value in items:
        if isinstance(key, bytes):
            key = key.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(key, str) and isinstance(value, str):
            out[key.strip().lower()] = value.strip()
    return out


def _bucket_hint(buckets: list[tuple[float | None, str | None]]) -> float | None:
    """Pick one reset among rate-limit buckets.

    Each bucket is (sane reset in seconds or None, raw remaining or None).
    The longest reset among buckets whose remaining is 0 wins; when no bucket
    has a remaining header, the shortest reset present; otherwise (some
    remaining known, none at 0) no hint.
    """
    exhausted = [
        reset
        for reset, remaining in buckets
        if reset is not None and remaining is not None and _ZERO.fullmatch(remaining)
    ]
    if exhausted:
        return max(exhausted)
    if all(remaining is None for _, remaining in buckets):
        present = [reset for reset, _ in buckets if reset is not None]
        return min(present) if present else None
    return None


def _openai_hint(lowered: Mapping[str, str]) -> float | None:
    buckets = [
        (
            _sane(parse_go_duration_s(lowered.get(f"x-ratelimit-reset-{b}", ""))),
            lowered.get(f"x-ratelimit-remaining-{b}"),
        )
        for b in _OPENAI_BUCKETS
    ]
    return _bucket_hint(buckets)


def _anthropic_hint(lowered: Mapping[str, str], now_epoch_s: float) -> float | None:
    buckets = [
        (
            _sane(_parse_rfc3339_s(lowered.get(f"anthropic-ratelimit-{b}-reset", ""), now_epoch_s)),
            lowered.get(f"anthropic-ratelimit-{b}-remaining"),
        )
        for b in _ANTHROPIC_BUCKETS
    ]
    return _bucket_hint(buckets)


def _parse_spoken_duration_s(token: str) -> float | None:
    """'20s', '1m0.36s', '300ms' (Go form) or '1.5 seconds', '2 minutes'."""
    compact = "".join(token.split())
    go = parse_go_duration_s(compact)
    if go is not None:
        return go
    match = _WORD_DURATION.fullmatch(token.strip())
    if match is None:
        return None
    number, unit = match.groups()
    for prefix, factor in _WORD_UNIT_S:
        if unit.startswith(prefix):
            return float(number) * factor
    return None


def _message_hint(message: str) -> float | None:
    if not isinstance(message, str) or not message:
        return None
    for match in _MESSAGE_HINT.finditer(message.lower()):
        hint = _sane(_parse_spoken_duration_s(match.group("dur")))
        if hint is not None:
            return hint
    return None


def should_retry_hint(headers: Mapping[str, str]) -> bool | None:
    """The provider's `x-should-retry` header: True (`true`), False (`false`), else None.

    OpenAI's API sends it to tell a client whether to re-send a failed request; the
    official SDKs obey it before the status. Case of the name and the value ignored;
    any other value is no word at all.
    """
    for name, value in headers.items():
        if name.lower() == "x-should-retry":
            word = value.strip().lower()
            return True if word == "true" else False if word == "false" else None
    return None


def retry_after_s(
    headers: Mapping[str, str],
    *,
    status: int | None,
    message: str,
    now_epoch_s: float,
) -> float | None:
    """The provider's rate-limit hint for *this* response, in seconds.

    Sources, first sane one wins (SPEC §3 "Backoff"):

    1. `retry-after-ms`: milliseconds, decimals allowed (OpenAI / Azure).
    2. `Retry-After`: delay-seconds or HTTP-date, RFC 9110 §10.2.3 (see
       `parse_retry_after_s`).
    3. Only when `status` is 429 — OpenAI / Groq `x-ratelimit-reset-requests`
       and `x-ratelimit-reset-tokens` (Go durations, `6m0s`): the longest
       reset among buckets whose `x-ratelimit-remaining-*` is `0`; if no
       remaining header is present at all, the shortest reset present; if
       remaining headers are present but none is `0`, no hint from this
       source.
    4. Only when `status` is 429 — Anthropic
       `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset`
       (RFC 3339 timestamps, converted with `now_epoch_s`), with the same
       rule over `anthropic-ratelimit-*-remaining`.
    5. Wording in the message: "try again in 20s", "try again in 1.5
       seconds", "retry after 300ms", "Please retry in 7.2s", "Please retry
       after 7 seconds", "try again in 1m0.36s", `"retryDelay": "38s"`.

    Header names are matched case-insensitively. Junk, negative, NaN / inf
    and absurd values (more than `MAX_HINT_S`, one day) are ignored for their
    source, and the next source is tried. A date or reset in the past gives
    0.0.

    Args:
        headers: the response headers (any Mapping of str to str).
        status: the response's HTTP status, or None.
        message: the provider's error message ("" when none).
        now_epoch_s: the current time, Unix epoch seconds (for dates).

    Returns:
        Seconds to wait, 0.0 <= hint <= 86400.0, or None when no source gives
        a sane hint. Never raises.
    """
    lowered = _lower_headers(headers)

    ms_value = lowered.get("retry-after-ms", "")
    if _DECIMAL.fullmatch(ms_value):
        hint = _sane(float(ms_value) / 1000.0)
        if hint is not None:
            return hint

    retry_after = lowered.get("retry-after")
    if retry_after is not None:
        hint = _sane(parse_retry_after_s(retry_after, now_epoch_s))
        if hint is not None:
            return hint

    if status == 429:
        hint = _openai_hint(lowered)
        if hint is not None:
            return hint
        hint = _anthropic_hint(lowered, now_epoch_s)
        if hint is not None:
            return hint

    return _message_hint(message)
