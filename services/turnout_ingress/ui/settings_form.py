"""The settings form of the dashboard: a scope's settings as form fields, the form back as an admin
API patch, and the diff of a change (#45 item 8).

Owns: `FIELDS` (one form field per leaf of `turnout.core.scopes.ScopeSettings`, found from its
types, so a policy field added there gets its field here), `form_values` (a scope's settings as the
form's texts), `to_patch` (the form's texts as the `PATCH .../settings` body the admin API takes:
only the settings that changed, `null` for one left empty, which is *inherit*) and `diff` (old →
new per leaf). Nothing here validates: a value the form cannot turn into JSON of the right type is
passed on as text, and the admin API's own decoding refuses it with its own words
(`turnout_ingress.admin.settings.settings_edit`).
Must not import: the UI's routes, FastAPI.

Texts: a number as written; a list as `a, b`; a model map as one `model: a, b` line per model
(a line without `:` is the plain list, meaning every model); a status list as `429, 5xx`; a yes/no
as `true` / `false`; a strategy as its JSON; empty: inherit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import msgspec
from msgspec import inspect

from turnout.core.scopes import SETTING_NAMES, ScopeSettings
from turnout.json_reason import json_reason

Kind = Literal["int", "float", "bool", "choice", "list", "statuses", "map", "json"]


class Field(msgspec.Struct, frozen=True, kw_only=True):
    """One form field.

    Attributes:
        name: its path in the settings (`policy.retry.max_retries`, `limits.rpm`, `fallbacks`).
        kind: how its text is read (module doc).
        choices: the values of a `choice` (a `bool`: `true`, `false`).
        group: the setting it belongs to (`policy.retry`, `limits`, `routing`).
    """

    name: str
    kind: Kind
    choices: tuple[str, ...] = ()
    group: str

    @property
    def setting(self) -> str:
        """The top-level setting of the field (`policy`, `limits`, `fallbacks`)."""
        return self.name.split(".", 1)[0]


def _bare(t: inspect.Type) -> inspect.Type:
    """`t` without its `UNSET` / `None` alternatives and metadata."""
    if isinstance(t, inspect.Metadata):
        return _bare(t.type)
    if isinstance(t, inspect.UnionType):
        kept = [x for x in t.types if not isinstance(x, inspect.NoneType)]
        if len(kept) == 1:
            return _bare(kept[0])
    return t


def _kind(t: inspect.Type) -> tuple[Kind, tuple[str, ...]]:
    """The form field kind of a leaf type, and its choices."""
    t = _bare(t)
    if isinstance(t, inspect.BoolType):
        return "bool", ("true", "false")
    if isinstance(t, inspect.IntType):
        return "int", ()
    if isinstance(t, inspect.FloatType):
        return "float", ()
    if isinstance(t, inspect.LiteralType):
        return "choice", tuple(str(v) for v in t.values)
    if isinstance(t, (inspect.ListType, inspect.VarTupleType)):
        item = _bare(t.item_type)
        if isinstance(item, inspect.StrType):
            return "list", ()
        if isinstance(item, inspect.UnionType):
            return "statuses", ()
    if isinstance(t, inspect.UnionType) and any(isinstance(_bare(x), inspect.DictType) for x in t.types):
        return "map", ()
    return "json", ()


def _fields() -> tuple[Field, ...]:
    """One field per leaf of `ScopeSettings`: a struct's fields (a policy section's) each, every
    other setting whole."""
    found: list[Field] = []
    info = inspect.type_info(ScopeSettings)
    assert isinstance(info, inspect.StructType)
    for setting in info.fields:
        t = _bare(setting.type)
        if isinstance(t, inspect.StructType) and setting.name == "policy":
            for section in t.fields:
                sub = _bare(section.type)
                assert isinstance(sub, inspect.StructType)
                for leaf in sub.fields:
                    kind, choices = _kind(leaf.type)
                    name = f"policy.{section.name}.{leaf.name}"
                    found.append(Field(name=name, kind=kind, choices=choices, group=f"policy.{section.name}"))
        elif isinstance(t, inspect.StructType):
            for leaf in t.fields:
                kind, choices = _kind(leaf.type)
                found.append(Field(name=f"{setting.name}.{leaf.name}", kind=kind, choices=choices, group=setting.name))
        else:
            kind, choices = _kind(setting.type)
            group = "strategy" if setting.name == "strategy" else "routing"
            found.append(Field(name=setting.name, kind=kind, choices=choices, group=group))
    return tuple(found)


FIELDS: tuple[Field, ...] = _fields()
"""Every field of the settings form, in `ScopeSettings`'s order."""

GROUPS: tuple[str, ...] = tuple(dict.fromkeys(f.group for f in FIELDS))
"""The form's sections, in order (`routing`, `policy.retry`, ..., `budget`, `strategy`, `limits`)."""


def leaf(values: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted `path` of nested dicts, or None."""
    at: Any = values
    for part in path.split("."):
        if not isinstance(at, Mapping) or part not in at:
            return None
        at = at[part]
    return at


def text_of(field: Field, value: Any) -> str:
    """A stored value as its field's text (None: empty, inherit)."""
    if value is None:
        return ""
    if field.kind == "bool":
        return "true" if value else "false"
    if field.kind in ("list", "statuses"):
        return ", ".join(str(v) for v in value)
    if field.kind == "map":
        if isinstance(value, list):
            return ", ".join(value)
        return "\n".join(f"{k}: {', '.join(v)}" for k, v in value.items())
    if field.kind == "json":
        return msgspec.json.encode(value).decode()
    if field.kind == "float" and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def form_values(settings: ScopeSettings) -> dict[str, str]:
    """A scope's own settings as the form's texts, by field name (empty: inherit)."""
    values = _plain(settings)
    return {f.name: text_of(f, leaf(values, f.name)) for f in FIELDS}


_SPLIT = re.compile(r"[,\s]+")
_INT = re.compile(r"[+-]?\d+")


def _items(text: str) -> list[str]:
    return [t for t in _SPLIT.split(text.strip()) if t]


def _number(text: str, kind: Kind) -> Any:
    """A number's text as a JSON number; text that is none stays text (the admin API refuses it)."""
    if _INT.fullmatch(text):
        return int(text)
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            return text
    return text


def _model_map(text: str) -> dict[str, list[str]] | list[str]:
    """`model: a, b` lines as a map; lines without `:` are the plain list (every model)."""
    mapped: dict[str, list[str]] = {}
    plain: list[str] = []
    for line in text.splitlines():
        model, colon, models = line.partition(":")
        if not line.strip():
            continue
        if colon:
            mapped.setdefault(model.strip(), []).extend(_items(models))
        else:
            plain.extend(_items(line))
    if plain and not mapped:
        return plain
    if plain:
        mapped.setdefault("*", []).extend(plain)
    return mapped


class FormError(Exception):
    """A field's text the form could not read (only a strategy's JSON: every other text is passed on)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def _value(field: Field, text: str) -> Any:
    """A field's text as its JSON value (None: empty, inherit)."""
    text = text.strip()
    if not text:
        return None
    if field.kind in ("int", "float"):
        return _number(text, field.kind)
    if field.kind == "bool":
        return {"true": True, "false": False}.get(text.lower(), text)
    if field.kind == "list":
        return _items(text)
    if field.kind == "statuses":
        return [int(t) if _INT.fullmatch(t) else t for t in _items(text)]
    if field.kind == "map":
        return _model_map(text)
    if field.kind == "json":
        raw = text.encode()
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise FormError(field.name, f"settings.{field.name}: not valid JSON: {json_reason(raw, exc)}") from None
    return text


def wanted(form: Mapping[str, str]) -> dict[str, Any]:
    """The settings the form asks for, as JSON values by setting (a setting left empty is absent).

    Raises:
        FormError: a strategy that is not JSON.
    """
    out: dict[str, Any] = {}
    for field in FIELDS:
        value = _value(field, form.get(field.name, ""))
        if value is None:
            continue
        at = out
        *parents, last = field.name.split(".")
        for part in parents:
            at = at.setdefault(part, {})
        at[last] = value
    return out


def _normal(name: str, value: Any) -> Any:
    """A setting's JSON value as the store would keep it (defaults filled), or as given when the
    admin API would refuse it (it says why)."""
    try:
        return _plain(msgspec.convert({name: value}, ScopeSettings)).get(name)
    except msgspec.ValidationError:
        return value


def _plain(settings: ScopeSettings) -> dict[str, Any]:
    """`settings` as the JSON the admin API reads and answers (lists, not tuples)."""
    plain: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(settings))
    return plain


def to_patch(form: Mapping[str, str], current: ScopeSettings) -> dict[str, Any]:
    """The `PATCH .../settings` body of the form's change to `current`: each setting whose value
    the form changes (`null`: left empty, back to inherit), nothing else.

    Raises:
        FormError: a strategy that is not JSON.
    """
    now = _plain(current)
    new = wanted(form)
    patch: dict[str, Any] = {}
    for name in SETTING_NAMES:
        value = _normal(name, new[name]) if name in new else None
        if value != now.get(name):
            patch[name] = value
    return patch


_MAPS = frozenset(f.name for f in FIELDS if f.kind == "map")
"""The model map settings: a diff shows each whole."""


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One leaf of the settings a save changes: `old` → `new` as the form shows them (`""`: inherit)."""

    path: str
    old: str
    new: str


def _leaves(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every leaf of nested dicts as (dotted path, value); lists are leaves."""
    if isinstance(value, Mapping) and prefix.split(".", 1)[0] not in _MAPS:
        for key, sub in value.items():
            yield from _leaves(sub, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(
            _shown(v) if not isinstance(v, (dict, list)) else msgspec.json.encode(v).decode() for v in value
        )
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_shown(v)}" for k, v in value.items())
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def diff(old: ScopeSettings, new: ScopeSettings) -> list[Change]:
    """What changes from `old` to `new`, one `Change` per leaf (a policy field, a limit, a model
    map whole), in the settings' order."""
    before = dict(_leaves(_plain(old), ""))
    after = dict(_leaves(_plain(new), ""))
    paths = list(dict.fromkeys([*before, *after]))
    order = {name: i for i, name in enumerate(SETTING_NAMES)}
    paths.sort(key=lambda p: order.get(p.split(".", 1)[0], len(order)))
    return [
        Change(path=p, old=_shown(before.get(p)), new=_shown(after.get(p)))
        for p in paths
        if before.get(p) != after.get(p)
    ]


def field_of(param: str | None) -> str | None:
    """The form field or section an admin API error's `param` names (`settings.policy.retry.max_retries`,
    `settings.fallbacks.gpt-5[0]`: `fallbacks`, `settings.budget`: the section), or None (the form's top)."""
    if not param:
        return None
    path = param.removeprefix("settings.")
    names = {f.name for f in FIELDS} | set(GROUPS)
    while path:
        if path in names:
            return path
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return None
