"""Every type error of a configuration document at once, each with its path.

Owns: walking a decoded YAML document against the msgspec types it must
convert to (`turnout.config.RawConfig`), so `turnout config check` and a
refused start report all the type errors of a file in one run: unknown
fields with a "did you mean", missing fields, wrong types, out-of-range
values (with the rule in words when the type's `msgspec.Meta` has a
`description`) and enum values with the allowed ones listed.

The walk keeps the path itself: a Struct is walked field by field
(`msgspec.structs.fields`), a mapping entry by entry, a list item by item, and
each value is converted where it sits (`msgspec.convert`), so msgspec's message
is about that value alone and is never parsed; what the message leaves out (the
allowed values, the rule in words) is read off the type (`msgspec.inspect`).
Must not import: services; it knows nothing of Turnout's fields.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import msgspec
from msgspec import inspect as mi

from turnout.core.field_values import described

_UNIONS = (typing.Union, types.UnionType)


def _strip(tp: Any) -> Any:
    """`tp` without `Annotated[...]` wrappers."""
    while get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    return tp


def _takes_object(tp: Any) -> bool:
    """`tp` is converted from a JSON object (a Struct or a mapping)."""
    return (isinstance(tp, type) and issubclass(tp, msgspec.Struct)) or get_origin(tp) in (dict, Mapping)


def _takes_array(tp: Any) -> bool:
    """`tp` is converted from a JSON array (a list or a tuple)."""
    return get_origin(tp) in (list, tuple)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _arms(info: mi.Type) -> list[mi.Type]:
    """The alternatives of `info` (one unless a union), each without its `Metadata` wrapper."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if isinstance(info, mi.UnionType):
        return [arm for member in info.types for arm in _arms(member)]
    return [info]


def _literals(tp: Any) -> tuple[Any, ...]:
    """The allowed values of a `Literal` (or a union with one), in the order declared, else ()."""
    tp = _strip(tp)
    if get_origin(tp) is Literal:
        return get_args(tp)
    if get_origin(tp) in _UNIONS:
        return tuple(value for arm in get_args(tp) for value in _literals(arm))
    return ()


def _explained(value: Any, tp: Any, message: str) -> str:
    """msgspec's `message` for `value` against `tp`, with what the type says: the allowed values of
    a wrong enum value, the rule in words of a described type (in place of a regex a string missed)."""
    info = mi.type_info(tp)
    arms = _arms(info)
    allowed = _literals(tp)
    if any(type(value) is type(v) for v in allowed):  # the right type, not one of the values
        message += f" (allowed: {', '.join(repr(a) for a in allowed)})"
    rule = described(info)
    patterns = [arm.pattern for arm in arms if isinstance(arm, mi.StrType) and arm.pattern]
    if rule and isinstance(value, str) and patterns and not any(re.search(p, value) for p in patterns):
        return f"Expected {rule}, got {value[:40]!r}"  # the rule in words, not the pattern
    return f"{message} ({rule})" if rule else message


def _struct_errors(value: dict[Any, Any], tp: type[msgspec.Struct], path: str) -> list[str]:
    """Unknown fields (with a close name when there is one), missing required fields, then each
    field's own errors, in field order."""
    fields = msgspec.structs.fields(tp)
    names = [f.encode_name for f in fields]
    errors: list[str] = []
    if tp.__struct_config__.forbid_unknown_fields:
        for key in value:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.75)
                hint = f" (did you mean `{close[0]}`?)" if close else f" (known fields: {', '.join(names)})"
                errors.append(f"{_join(path, str(key))}: unknown field `{key}`{hint}")
    errors += [
        f"{_join(path, f.encode_name)}: missing required field"
        for f in fields
        if f.required and f.encode_name not in value
    ]
    for field in fields:
        if field.encode_name in value:
            errors += collect(value[field.encode_name], field.type, _join(path, field.encode_name))
    return errors


def _part_errors(value: Any, tp: Any, path: str) -> list[str]:
    """The errors of the parts of `value` (a Struct's fields, a mapping's values, a list's items)
    against the parts of `tp`; [] when `value` has no parts `tp` describes."""
    bare = _strip(tp)
    if get_origin(bare) in _UNIONS and isinstance(value, (dict, list)):
        fits = _takes_object if isinstance(value, dict) else _takes_array
        shaped = [a for a in map(_strip, get_args(bare)) if fits(a)]
        if len(shaped) == 1:  # `Struct | None`, `list[X] | UnsetType`: the one arm this value can be
            bare = shaped[0]
    origin = get_origin(bare)
    if isinstance(bare, type) and issubclass(bare, msgspec.Struct) and isinstance(value, dict):
        return _struct_errors(value, bare, path)
    if origin in (dict, Mapping) and isinstance(value, dict):
        key, item = get_args(bare) or (Any, Any)
        keys = [message for k in value for message in collect(k, key, path)]
        return keys + [e for k, v in value.items() for e in collect(v, item, _join(path, str(k)))]
    if origin in (list, tuple) and isinstance(value, list):
        args = get_args(bare)
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            return [e for i, v in enumerate(value) for e in collect(v, args[0] if args else Any, f"{path}[{i}]")]
    return []


def collect(value: Any, tp: Any, path: str = "") -> list[str]:
    """Every error converting `value` to `tp`, as `path: message` lines.

    Args:
        value: a decoded YAML/JSON value (dicts, lists, scalars).
        tp: the type it must convert to (msgspec Structs, dicts, lists,
            unions, literals, `Annotated` constraints).
        path: the dotted path of `value` (`""` for the document).

    Returns:
        The errors, first to last in document order; [] when `value` converts.
        Never raises.
    """
    try:
        msgspec.convert(value, tp)
        return []
    except msgspec.ValidationError as exc:
        failure = str(exc)
    except Exception as exc:  # noqa: BLE001 - a type msgspec cannot take: report, never raise
        return [f"{path or '<document>'}: {exc}"]
    parts = _part_errors(value, tp, path)
    if parts:
        return parts
    # the parts convert: the failure is of the value itself (a length, a wrong type, a Struct's own rule)
    return [f"{path or '<document>'}: {_explained(value, tp, failure)}"]
