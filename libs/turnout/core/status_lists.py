"""The status a policy's status lists match, and the lists themselves (SPEC §3 / §4).

Owns: the status an outcome is matched as against `retry.retry_on_status` /
`fallback.on_status` (`status_for_lists`: as received, as its error envelope
stands for, or as its kind stands for when no status applies or the kind came
from wording), and a policy status list parsed into codes and whole classes
(`status_set`, `status_matches`).

Must not import: anything outside the standard library, msgspec and
`turnout.core`; no I/O, no clock, no randomness, no asyncio.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, cast

from turnout.core.types import FailureKind, Outcome
from turnout.core.wording import envelope_status

__all__ = [
    "SERVER_ERROR_STATUSES",
    "StatusSet",
    "int_status",
    "is_2xx",
    "status_for_lists",
    "status_matches",
    "status_set",
]

# (status for retry lists, status for fallback lists) when the outcome carries
# no usable HTTP status. SPEC §3: transport failures "are retried as if they
# were a 503 and fail over as if they were a 502".
_SYNTHETIC_STATUS: Final[Mapping[FailureKind, tuple[int, int]]] = types.MappingProxyType(
    {
        FailureKind.TRANSPORT: (503, 502),
        FailureKind.TIMEOUT: (504, 504),
        FailureKind.MALFORMED: (502, 502),
        FailureKind.RATE_LIMITED: (429, 429),
        FailureKind.SERVER_ERROR: (503, 503),
        FailureKind.OTHER_5XX: (502, 502),
    }
)

SERVER_ERROR_STATUSES: Final[frozenset[int]] = frozenset({500, 502, 503, 529})
"""The statuses that are SERVER_ERROR (SPEC §3 row 3); other 5xx are OTHER_5XX, 504 a TIMEOUT."""


def int_status(status: object) -> int | None:
    """The status as an int, or None when absent or not an int (bools are junk)."""
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def is_2xx(status: int | None) -> bool:
    """Whether `status` is a 2xx."""
    return status is not None and 200 <= status < 300


def status_for_lists(
    outcome: Outcome,
    kind: FailureKind,
    *,
    purpose: Literal["retry", "fallback"],
) -> int | None:
    """The status matched against `retry.retry_on_status` / `fallback.on_status`.

    SPEC §3 / §4:

    - an HTTP error status (4xx / 5xx) is used as received, unless the
      class was decided by wording: then the status the class stands for
      (a 403 speaking of a rate limit or overload is RATE_LIMITED and is
      matched as 429; see `_standing_status`);
    - an error envelope inside a 2xx body (or a stream with no status) uses
      the status it is classified as (`envelope_status`: 429, 529, 500, …);
    - otherwise the status stands in for the kind: TRANSPORT → 503 for
      "retry" and 502 for "fallback" ("retried as if they were a 503 and fail
      over as if they were a 502"); TIMEOUT → 504; MALFORMED → 502 (also for
      a 1xx / 3xx or a 2xx whose body broke); RATE_LIMITED → 429 and
      SERVER_ERROR → 503 when they came from wording alone;
    - SUCCESS → the received status (or None).

    Args:
        outcome: the attempt's outcome.
        kind: its classification (normally `classify(outcome)`).
        purpose: "retry" for `retry.retry_on_status`, "fallback" for
            `fallback.on_status`.

    Returns:
        An HTTP status, or None when no status applies (the kinds decided by
        class, not by the lists: quota, no credential, auth, client errors
        without a status, cancelled). Never raises.
    """
    status = int_status(outcome.status)
    if kind == FailureKind.SUCCESS:
        return status
    if status is not None and 400 <= status <= 599:
        return _standing_status(status, kind, purpose)
    if outcome.error_in_body and (status is None or is_2xx(status)):
        return envelope_status(outcome.error_type, outcome.error_code)
    pair = _SYNTHETIC_STATUS.get(kind)
    if pair is None:
        return None
    return pair[0] if purpose == "retry" else pair[1]


_NATURAL_STATUSES: Final[Mapping[FailureKind, frozenset[int]]] = types.MappingProxyType(
    {
        FailureKind.RATE_LIMITED: frozenset({429}),
        FailureKind.SERVER_ERROR: SERVER_ERROR_STATUSES,
        FailureKind.TIMEOUT: frozenset({408, 504}),
    }
)
"""Statuses that are a kind's own: any other status of that kind was decided by wording."""


def _standing_status(status: int, kind: FailureKind, purpose: Literal["retry", "fallback"]) -> int:
    """`status` as received, or the status its kind stands for when the kind
    came from the wording (403 + "rate limit" → 429). Kinds decided by class
    (quota, auth, client errors…) keep the received status."""
    natural = _NATURAL_STATUSES.get(kind)
    if natural is None or status in natural:
        return status
    pair = _SYNTHETIC_STATUS[kind]
    return pair[0] if purpose == "retry" else pair[1]


_CLASS_ENTRY: Final = re.compile(r"([1-5])xx")
_CODE_ENTRY: Final = re.compile(r"[1-5][0-9][0-9]")


@dataclasses.dataclass(frozen=True, slots=True)
class StatusSet:
    """A policy status list, parsed: single codes and whole classes (`5` for `"5xx"`)."""

    codes: frozenset[int]
    classes: frozenset[int]

    def __contains__(self, status: object) -> bool:
        if isinstance(status, bool) or not isinstance(status, int):
            return False
        return status in self.codes or (100 <= status <= 599 and status // 100 in self.classes)


_NO_STATUS: Final = StatusSet(frozenset(), frozenset())


@functools.lru_cache(maxsize=256)
def _parsed(entries: tuple[tuple[type, object], ...]) -> StatusSet:
    """The list of (type, entry) pairs parsed: typed, so `500.0` and `True` are never
    taken for a cached `500` or `1` (they are equal as keys)."""
    codes: set[int] = set()
    classes: set[int] = set()
    for _, entry in entries:
        if isinstance(entry, bool):
            continue
        if isinstance(entry, int):
            codes.add(entry)
        elif isinstance(entry, str):
            text = entry.strip().lower()
            cls = _CLASS_ENTRY.fullmatch(text)
            if cls is not None:
                classes.add(int(cls.group(1)))
            elif _CODE_ENTRY.fullmatch(text):
                codes.add(int(text))
    return StatusSet(frozenset(codes), frozenset(classes))


def status_set(entries: object) -> StatusSet:
    """`entries` (a policy status list) parsed once: a list seen before is not parsed again.

    Entries are single codes (`503`, also the string `"503"`) or whole classes
    as strings (`"5xx"`, `"4xx"`, any case, surrounding spaces ignored). Junk
    entries (bools, floats, `"5x"`, `"abc"`, `None`) are left out; a junk list
    is empty. Never raises.
    """
    if isinstance(entries, str):
        entries = (entries,)
    try:
        key = tuple((type(entry), entry) for entry in cast(Iterable[object], entries))
    except TypeError:  # not iterable
        return _NO_STATUS
    try:
        return _parsed(key)
    except TypeError:  # an unhashable entry: parse without the cache
        return _parsed.__wrapped__(key)


def status_matches(status: int | None, entries: Sequence[int | str]) -> bool:
    """Whether `status` is in a policy status list (SPEC §3 / §4), through `status_set`.

    Args:
        status: the status from `status_for_lists`, or None.
        entries: the policy's list.

    Returns:
        True when an entry matches; False for a None status, junk entries or a
        junk list. Never raises.
    """
    return status in status_set(entries)
    return False
