"""The values a field of a msgspec type accepts, for a 400 that lists them.

Owns: `enum_values`, `with_enum_values`, `with_close_field`, `described` (a type's rule in
words) and `in_words` (msgspec's "Expected `int`, got `str`" said in words). msgspec refuses a string outside a `Literal` or an
`Enum` with "Invalid enum value 'cheap' - at `$.sort`" and names no value it
would take; the caller finds the field's type from the path msgspec gives
and lists them ("one of latency, price, throughput"). Only called on the
error path.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import msgspec

_STEP = re.compile(r"\.([^.\[]+)|\[(\.\.\.|\d+)\]")
"""One step of a msgspec error path: `.name` (a field) or `[3]` / `[...]` (an item, a map value)."""


def enum_values(tp: Any, path: str) -> list[str] | None:
    """The values the enum field at `path` of `tp` accepts, sorted, or None when `path` leads to none.

    Args:
        tp: the type decoded into (a `msgspec.Struct` class, or any type msgspec inspects).
        path: msgspec's path after `$` (`.sort`, `.policy.retry.mode`, `.items[2].kind`, `[...]`).

    Returns:
        The accepted values as strings, sorted; None for a path that does not
        parse, leaves the type, or ends at a field that is not a `Literal` or an `Enum`.
    """
    info = _at(tp, path)
    return None if info is None else _values(info)


def _at(tp: Any, path: str) -> Any:
    """The inspected type at msgspec's `path` of `tp`, or None when the path does not lead to one."""
    info: Any = msgspec.inspect.type_info(tp)
    at = 0
    while at < len(path):
        step = _STEP.match(path, at)
        if step is None:
            return None
        at = step.end()
        info = _step(info, step.group(1))
        if info is None:
            return None
    return info


def _candidates(info: Any) -> list[Any]:
    return list(info.types) if isinstance(info, msgspec.inspect.UnionType) else [info]


def _step(info: Any, field: str | None) -> Any:
    """The type one step down: a struct's field by its JSON name (`field`), or an item / map value (None)."""
    for candidate in _candidates(info):
        if field is not None and isinstance(candidate, msgspec.inspect.StructType):
            for f in candidate.fields:
                if f.encode_name == field:
                    return f.type
        if field is None and isinstance(candidate, msgspec.inspect.DictType):
            return candidate.value_type
        if field is None and isinstance(
            candidate, (msgspec.inspect.ListType, msgspec.inspect.VarTupleType, msgspec.inspect.SetType)
        ):
            return candidate.item_type
    return None


def _values(info: Any) -> list[str] | None:
    for candidate in _candidates(info):
        if isinstance(candidate, msgspec.inspect.LiteralType):
            return sorted(str(v) for v in candidate.values)
        if isinstance(candidate, msgspec.inspect.EnumType):
            return sorted(str(member.value) for member in candidate.cls)
    return None


def with_enum_values(reason: str, tp: Any, path: str) -> str:
    """msgspec's `reason` for the field at `path` of `tp`, with " (one of a, b)" added when it
    refused an enum value ("Invalid enum value 'cheap' (one of latency, price, throughput)");
    any other reason as it is."""
    values = enum_values(tp, path) if reason.startswith("Invalid enum value") else None
    return f"{reason} (one of {', '.join(values)})" if values else reason


def with_close_field(reason: str, tp: Any, path: str, unknown: str) -> str:
    """msgspec's `reason` for an unknown field `unknown` in the object at `path` of `tp`, with
    " (did you mean `x`?)" when one of that object's fields is close (difflib ratio ≥ 0.75, as
    the config file's check), else " (known fields: a, b)"; `reason` as it is when `path` leads
    to no struct."""
    info = _at(tp, path)
    structs = [c for c in _candidates(info) if isinstance(c, msgspec.inspect.StructType)] if info else []
    if not structs:
        return reason
    names = [f.encode_name for f in structs[0].fields]
    close = difflib.get_close_matches(unknown, names, n=1, cutoff=0.75)
    return f"{reason} (did you mean `{close[0]}`?)" if close else f"{reason} (known fields: {', '.join(names)})"


def described(info: Any) -> str | None:
    """The rule in words of an inspected type `info`: its `msgspec.Meta(description=...)`, else the
    one every arm of a union shares (an int or a string of one rule), else None."""
    if isinstance(info, msgspec.inspect.Metadata):
        found = (info.extra_json_schema or {}).get("description")
        return found if isinstance(found, str) else described(info.type)
    if isinstance(info, msgspec.inspect.UnionType):
        shared = {described(arm) for arm in info.types}
        return shared.pop() if len(shared) == 1 else None
    return None


_TYPE_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "bool": "true or false",
    "null": "null",
    "array": "a list",
    "object": "an object",
}
_EXPECTED = re.compile(r"Expected `([^`]+)`, got `([^`]+)`")
_PATTERN = re.compile(r"Expected `str` matching regex '.*'")


def in_words(reason: str, tp: Any, path: str) -> str:
    """msgspec's `reason` for the field at `path` of `tp` in words: "Expected `int | null`, got
    `str`" as "Expected a whole number or null, got text"; a string that missed a pattern as the
    field's rule in words (its `Meta(description=...)`) where it has one. Any other reason as it is."""
    if _PATTERN.match(reason):
        info = _at(tp, path)
        rule = described(info) if info is not None else None
        return f"Expected {rule}" if rule else reason
    match = _EXPECTED.fullmatch(reason)
    if match is None:
        return reason
    expected, got = _words(match.group(1)), _words(match.group(2))
    if got == "a number":  # JSON's 1.5 and 1e3: not a whole number as msgspec reads them
        got = "a number with a fraction or an exponent"
    return reason if expected is None or got is None else f"Expected {expected}, got {got}"


def _words(types: str) -> str | None:
    """`int | null` as "a whole number or null"; None when a type has no words here."""
    parts = [_TYPE_WORDS.get(t.strip()) for t in types.split("|")]
    if None in parts:
        return None
    return " or ".join(p for p in parts if p is not None)
