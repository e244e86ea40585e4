"""Why a request body is not JSON, in words that point at the fault.

Owns: `json_reason`, the reason quoted in a 400 for a body msgspec refused
(chat, messages and count_tokens routes, the admin API). msgspec's reasons are kept, except one that
misleads: for a high surrogate escape not followed by another escape
(`"\\ud800"` in a JSON string), msgspec says "Input data was truncated";
and one that names no field: a number out of range inside an object is "at
`$[...]`" (an untyped decode knows no keys), so the field is found and named
(`temperature`, `messages[0].content`; `out_of_range`, also for a caller
that names the field itself, as the admin API's `param`). Only called on the error path, and
linear in the body (one regular expression; for a number out of range, one
more parse by the standard library's `json`).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import msgspec

LONE_SURROGATE = (
    "a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF escape (a lone UTF-16 surrogate is not text)"
)

_HIGH_SURROGATE_ALONE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?=.)(?!\\u)", re.DOTALL)
"""A `\\uD800`-`\\uDBFF` escape (an odd run of backslashes before the `u`) followed by anything but another escape."""


_OUT_OF_RANGE_REASONS = ("Number out of range", "Integer value out of range")
"""How msgspec's reason starts for a number it cannot hold (valid JSON: RFC 8259 §6 sets no range)."""

_OUT_OF_RANGE = re.compile(rf"^({'|'.join(_OUT_OF_RANGE_REASONS)}) - at `\$[^`]*`$")
"""msgspec's reasons for a number it cannot hold: a float beyond a 64-bit double, an integer of too many digits."""

NUMBER_SHOWN_CHARS = 24
"""Characters of an out-of-range number quoted in its reason; a longer one is cut and its length given."""


def body_fault(reason: str) -> str:
    """What a refused body does wrong, for a sentence about it: `holds a number out of range`
    when `reason` (from `json_refusal`) is msgspec's for a number it cannot hold (the body is
    valid JSON then), else `is not valid JSON`."""
    return "holds a number out of range" if reason.startswith(_OUT_OF_RANGE_REASONS) else "is not valid JSON"


def json_reason(raw: bytes, exc: msgspec.DecodeError) -> str:
    """msgspec's reason for refusing `raw`, with two of its reasons made clearer.

    - `LONE_SURROGATE` where msgspec says "truncated" of a lone surrogate:
      RFC 8259 §8.2 leaves unpaired surrogates undefined; msgspec refuses
      them, and for a high surrogate escape followed by anything but another
      escape its reason is "Input data was truncated", though nothing was cut.
    - A number out of range (`1e400`, an integer of thousands of digits) names
      its field and quotes the number: "Number out of range - at
      `temperature` (1e400)", where msgspec says "at `$[...]`".
    """
    return json_refusal(raw, exc)[0]


def json_refusal(raw: bytes, exc: msgspec.DecodeError) -> tuple[str, str]:
    """`json_reason`, and the field it names (`temperature`), or "" when it names none.

    For a caller that also names the field as the error's `param`: the body
    is parsed a second time once, not once per use.
    """
    reason = str(exc)
    if reason == "Input data was truncated" and _HIGH_SURROGATE_ALONE.search(raw):
        return LONE_SURROGATE, ""
    found = out_of_range(raw, reason)
    if found is not None:
        return f"{found.reason} - at `{found.path or 'body'}` ({found.number})", found.path
    return reason, ""


class OutOfRange(NamedTuple):
    """A number of a body that no float or int holds.

    Attributes:
        reason: msgspec's words (`Number out of range`, `Integer value out of range`).
        path: its field (`budget.usd`, `messages[0].content`, `["a b"]`); "" for the body itself.
        number: the number as written, cut when long (`1e400`, `123456…, 5000 characters`).
    """

    reason: str
    path: str
    number: str


def out_of_range(raw: bytes, reason: str) -> OutOfRange | None:
    """The number msgspec's `reason` (the text of its `DecodeError` or `ValidationError` for `raw`)
    says is out of range, with its field; None for any other reason, or when no such number is
    found (`raw` not a document the standard library's `json` reads alike)."""
    match = _OUT_OF_RANGE.match(reason)
    if match is None:
        return None
    found = _first_out_of_range(raw)
    if found is None:
        return None
    path, number = found
    return OutOfRange(reason=match.group(1), path=path, number=_shown(number))


class _Huge(str):
    """A number's text that no float or int of this process holds (a marker in the second parse)."""


def _float_or_huge(text: str) -> float | _Huge:
    value = float(text)
    return _Huge(text) if value in (float("inf"), float("-inf")) else value


def _int_or_huge(text: str) -> int | _Huge:
    try:
        return int(text)
    except ValueError:  # more digits than `sys.get_int_max_str_digits()`
        return _Huge(text)


def _first_out_of_range(raw: bytes) -> tuple[str, str] | None:
    """(path, number text) of the first number in `raw` no float or int holds ("" the body itself), or None."""
    try:
        document = json.loads(raw, parse_float=_float_or_huge, parse_int=_int_or_huge)
    except (ValueError, RecursionError):  # not a document json reads the same way: keep msgspec's words
        return None
    return _find(document, "")


def _find(value: Any, path: str) -> tuple[str, str] | None:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Huge):
            return path, str(value)
        if isinstance(value, dict):
            children = [(v, _member(path, k)) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))  # depth first, in document order
    return None


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A key written bare in a path (`messages[0].content`); any other is quoted, and cut when long."""


def _member(path: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key[:64] + ('…' if len(key) > 64 else ''))}]"


def _shown(number: str) -> str:
    if len(number) <= NUMBER_SHOWN_CHARS:
        return number
    return f"{number[:NUMBER_SHOWN_CHARS]}…, {len(number)} characters"
