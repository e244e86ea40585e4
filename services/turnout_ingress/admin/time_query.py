"""The admin API's time query parameters: `since` / `until` / `at` read as epoch seconds.

Owns: parsing one moment (`parse_time`) and a `since`..`until` range
(`parse_range`) from a query, refusing parameters a route does not read
(`refuse_unknown`), and the 400 answered for a bad one: code
`invalid_value` (the admin API's code for a bad parameter value, README
"Admin API" and "Error codes"), `param` naming the parameter. Used by the
records export, the audit export, the spend route and the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from turnout.errors import RequestRejected
from turnout_ingress.admin.quote import quoted

INVALID_VALUE = "invalid_value"
"""`error.code` of a bad admin query parameter value."""
SHOWN_CHARS = 40
"""Characters of a refused value quoted in its message."""
MAX_EPOCH_S = 253_370_764_799
"""9998-12-31T23:59:59Z in epoch seconds: the last moment a query may name (its month
still ends in a year `datetime` holds)."""


def parse_time(value: str | None, param: str) -> float | None:
    """`value` (ISO-8601 such as `2025-06-01T12:00:00Z`, no zone meaning UTC, or epoch
    seconds) as epoch seconds; None when absent or empty.

    Raises:
        RequestRejected: 400 `invalid_value` naming `param` when `value` is neither,
            or names a moment outside 1970-01-01 .. 9998-12-31.
    """
    if value is None or value == "":
        return None
    try:
        epoch_s = float(value)
    except ValueError:
        epoch_s = None
    if epoch_s is None:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError as exc:
            raise RequestRejected(
                400,
                f"`{param}` must be ISO-8601 (2025-06-01T12:00:00Z) or epoch seconds, not {quoted(value, SHOWN_CHARS)}.",
                param=param,
                code=INVALID_VALUE,
            ) from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        epoch_s = parsed.timestamp()
    if not 0 <= epoch_s <= MAX_EPOCH_S:  # also refuses nan; inf and 1e400 are out of range
        raise RequestRejected(
            400,
            f"`{param}` must be a moment between 1970-01-01 and 9998-12-31 (epoch seconds 0 to {MAX_EPOCH_S}), "
            f"not {quoted(value, SHOWN_CHARS)}.",
            param=param,
            code=INVALID_VALUE,
        )
    return epoch_s


def parse_range(query: Mapping[str, str]) -> tuple[float | None, float | None]:
    """The query's `since` and `until` (both inclusive) as epoch seconds, None where absent.

    Raises:
        RequestRejected: 400 `invalid_value` naming the parameter that is not a moment
            (`parse_time`), or naming `since` when `since` is later than `until`
            (an empty range is a mistake, not an empty export).
    """
    since_s = parse_time(query.get("since"), "since")
    until_s = parse_time(query.get("until"), "until")
    if since_s is not None and until_s is not None and since_s > until_s:
        raise RequestRejected(
            400,
            f"`since` ({quoted(query.get('since'), SHOWN_CHARS)}) is later than `until` "
            f"({quoted(query.get('until'), SHOWN_CHARS)}): "
            "the range is empty; give `since` <= `until`.",
            param="since",
            code=INVALID_VALUE,
        )
    return since_s, until_s


def refuse_unknown(query: Mapping[str, str], known: tuple[str, ...]) -> None:
    """Refuse a query parameter the route does not read (a misspelt `sinse` would export everything),
    and one given more than once (`period=day&period=month`: which was meant is not known; the last
    one had been used silently). `query` may be any mapping; repeats are seen in a multi-valued one
    (Starlette's `QueryParams`, its `getlist`).

    Raises:
        RequestRejected: 400 `invalid_value` naming the first unknown parameter and the known ones,
            or the first repeated one and how many times it came.
    """
    getlist = getattr(query, "getlist", None)
    for name in known:
        times = len(getlist(name)) if getlist is not None else 0
        if times > 1:
            raise RequestRejected(
                400, f"`{name}` is given {times} times; send it once.", param=name, code=INVALID_VALUE
            )
    for name in query:
        if name not in known:
            raise RequestRejected(
                400,
                f"Unknown query parameter {quoted(name, SHOWN_CHARS)}; this route reads "
                + ", ".join(f"`{k}`" for k in known)
                + ".",
                param=name[:SHOWN_CHARS],
                code=INVALID_VALUE,
            )
