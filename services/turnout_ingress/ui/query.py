"""The dashboard pages' query parameters: each read, or the message the page shows about it.

Owns: reading `size`, `last`, `outcome`, `since` and `until` as the Activity and
export pages take them. A bad value is not an error answer: the page says what was
wrong (its selects offer only good values; a hand-typed URL may not).
Must not import: FastAPI.
"""

from __future__ import annotations

from collections.abc import Mapping

from turnout.errors import RequestRejected
from turnout_ingress.admin.quote import quoted
from turnout_ingress.admin.time_query import parse_range
from turnout_ingress.ui.activity import OUTCOMES

LAST_MAX_MIN = 60 * 24 * 30
"""The longest `last` window of the activity page (minutes: 30 days)."""


def bounded_int(value: str | None, default: int, low: int, high: int) -> int:
    """`value` as an integer clamped to [`low`, `high`]; `default` when absent or not an integer."""
    try:
        return max(low, min(high, int(value or default)))
    except ValueError:
        return default


def last_minutes(value: str | None) -> tuple[int, str | None]:
    """The activity page's `last` (minutes; 0 = no window), or 0 and an error message for the page
    when it is not a whole number of minutes from 1 to `LAST_MAX_MIN` (its select offers only such)."""
    if not value:
        return 0, None
    try:
        minutes = int(value)
    except ValueError:
        minutes = 0
    if 1 <= minutes <= LAST_MAX_MIN:
        return minutes, None
    return 0, f"`last` must be a whole number of minutes from 1 to {LAST_MAX_MIN}, not {quoted(value, 40)}."


def outcome(value: str | None) -> tuple[str | None, str | None]:
    """The activity page's `outcome` filter (None = any), or None and an error message for the page
    when it is not one of `OUTCOMES` (its select offers only those)."""
    if not value:
        return None, None
    if value in OUTCOMES:
        return value, None
    return None, f"`outcome` must be {' or '.join(OUTCOMES)}, not {quoted(value, 40)}."


def times(q: Mapping[str, str]) -> tuple[float | None, float | None, str | None]:
    """`since` and `until` of a query (epoch s, None when absent), or an error message for the page
    (a bad moment, or `since` later than `until`: `time_query.parse_range`)."""
    try:
        since_s, until_s = parse_range(q)
        return since_s, until_s, None
    except RequestRejected as exc:
        return None, None, exc.message
