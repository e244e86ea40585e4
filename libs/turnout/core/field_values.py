"""The values a field of a msgspec type accepts, for a 400 that lists them.

Owns: `enum_values`, `with_enum_values` and `with_close_field`. msgspec refuses a string outside a `Literal` or an
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
