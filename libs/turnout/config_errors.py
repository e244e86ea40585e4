"""Every error of a configuration document at once, each with its path.

Owns: walking a decoded YAML document against the msgspec types it must
convert to (`turnout.config.RawConfig`), so `turnout config check` and a
refused start report all the type errors of a file in one run: unknown
fields with a "did you mean", missing fields, wrong types, out-of-range
values (with the rule in words when the type's `msgspec.Meta` has a
`description`) and enum values with the allowed ones listed.
Must not import: services; it knows nothing of Turnout's fields.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import msgspec

MAX_ERRORS = 50
"""At most this many errors are reported (the rest are counted)."""


def _message(exc: msgspec.ValidationError) -> str:
    return str(exc).split(" - at ")[0]


def _strip(tp: Any) -> Any:
    """`tp` without `Annotated[...]` wrappers."""
    while get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    return tp


def _description(tp: Any) -> str | None:
    """The `description` of the `msgspec.Meta` constraining `tp` (the rule in words), if any."""
    if get_origin(tp) is not typing.Annotated:
        return None
    for meta in reversed(get_args(tp)[1:]):
        if isinstance(meta, msgspec.Meta) and meta.description:
            return meta.description
    return _description(get_args(tp)[0])


def _union_description(tp: Any) -> str | None:
    """The one description every arm of a union shares (`StatusEntry`: an int or a string), if any."""
    if get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    found = {_description(arm) for arm in get_args(tp)}
    return found.pop() if len(found) == 1 else None


def _literals(tp: Any) -> tuple[Any, ...]:
    """The allowed values of a `Literal` (or an optional one), else ()."""
    tp = _strip(tp)
    if get_origin(tp) is Literal:
        return get_args(tp)
    if get_origin(tp) in (typing.Union, types.UnionType):
        out: tuple[Any, ...] = ()
        for arg in get_args(tp):
            out += _literals(arg)
        return out
    return ()


def _takes_object(tp: Any) -> bool:
    """`tp` is converted from a JSON object (a Struct or a mapping)."""
    return (isinstance(tp, type) and issubclass(tp, msgspec.Struct)) or get_origin(tp) in (dict, Mapping)


def _takes_array(tp: Any) -> bool:
    """`tp` is converted from a JSON array (a list or a tuple)."""
    return get_origin(tp) in (list, tuple)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _struct_errors(value: dict[str, Any], tp: type[msgspec.Struct], path: str) -> list[str]:
    hints = typing.get_type_hints(tp, include_extras=True)
    fields = tp.__struct_fields__
    required = fields[: len(fields) - len(tp.__struct_defaults__)]
    errors: list[str] = []
    if tp.__struct_config__.forbid_unknown_fields:
        for key in value:
            if key not in fields:
                close = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.75)
                hint = f" (did you mean `{close[0]}`?)" if close else f" (known fields: {', '.join(fields)})"
                errors.append(f"{_join(path, str(key))}: unknown field `{key}`{hint}")
    for name in required:
        if name not in value:
            errors.append(f"{_join(path, name)}: missing required field")
    for name in fields:
        if name in value:
            errors.extend(collect(value[name], hints[name], _join(path, name)))
    return errors


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
        first = exc
    except Exception as exc:  # noqa: BLE001 - a type msgspec cannot take: report, never raise
        return [f"{path or '<document>'}: {exc}"]
    bare = _strip(tp)
    if get_origin(bare) in (typing.Union, types.UnionType) and isinstance(value, (dict, list)):
        fits = _takes_object if isinstance(value, dict) else _takes_array
        shaped = [a for a in map(_strip, get_args(bare)) if fits(a)]
        if len(shaped) == 1:  # `Struct | None`, `list[X] | UnsetType`: the one arm this value can be
            bare = shaped[0]
    origin = get_origin(bare)
    if isinstance(bare, type) and issubclass(bare, msgspec.Struct) and isinstance(value, dict):
        errors = _struct_errors(value, bare, path)
        if errors:
            return errors
    elif origin in (dict, Mapping) and isinstance(value, dict):
        _, item = get_args(bare) or (Any, Any)
        errors = [e for k, v in value.items() for e in collect(v, item, _join(path, str(k)))]
        if errors:
            return errors
    elif origin in (list, tuple) and isinstance(value, list):
        args = get_args(bare)
        item = args[0] if args else Any
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis or origin is list:
            errors = [e for i, v in enumerate(value) for e in collect(v, item, f"{path}[{i}]")]
            if errors:
                return errors
    message = _message(first)
    allowed = _literals(tp)
    if allowed and "enum" in message.lower():
        message += f" (allowed: {', '.join(repr(a) for a in allowed)})"
    described = _description(tp) or _union_description(tp)
    if described and "matching regex" in message:  # the rule in words, not the pattern, and what was written
        message = f"Expected {described}, got {str(value)[:40]!r}"
    elif described:
        message += f" ({described})"
    return [f"{path or '<document>'}: {message}"]


def report(errors: list[str]) -> str:
    """The errors as one message, one per line (at most `MAX_ERRORS`)."""
    shown = errors[:MAX_ERRORS]
    more = len(errors) - len(shown)
    return "\n".join(shown + ([f"... and {more} more"] if more > 0 else []))
