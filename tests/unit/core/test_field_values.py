"""`turnout.core.field_values`: the values an enum field accepts, found from msgspec's error path."""

from __future__ import annotations

import enum
from typing import Literal

import msgspec
import pytest

from turnout.core.field_values import enum_values, with_close_field


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


class Leaf(msgspec.Struct):
    kind: Literal["b", "a"] | None = None
    mode: Mode = Mode.FAST
    count: int = 0


class Root(msgspec.Struct):
    leaf: Leaf | None = None
    items: list[Leaf] = []
    by_name: dict[str, Leaf] = {}
    renamed: Literal["x", "y"] = msgspec.field(default="x", name="other-name")


@pytest.mark.parametrize(
    ("path", "values"),
    [
        (".leaf.kind", ["a", "b"]),
        (".leaf.mode", ["fast", "safe"]),
        (".items[3].kind", ["a", "b"]),
        (".by_name[...].mode", ["fast", "safe"]),
        (".other-name", ["x", "y"]),
    ],
)
def test_the_values_of_the_enum_at_the_path(path: str, values: list[str]) -> None:
    assert enum_values(Root, path) == values


@pytest.mark.parametrize(
    "path", [".leaf.count", ".leaf", ".nothing", ".leaf.kind.deeper", "[0]", "", ".items[x]", "oops"]
)
def test_a_path_to_no_enum_is_none(path: str) -> None:
    assert enum_values(Root, path) is None


@pytest.mark.parametrize(
    ("raw", "values"),
    [
        (b'{"leaf": {"kind": "c"}}', ["a", "b"]),
        (b'{"items": [{}, {"mode": "slow"}]}', ["fast", "safe"]),
        (b'{"by_name": {"k": {"kind": "z"}}}', ["a", "b"]),
    ],
)
def test_msgspecs_own_paths_lead_to_the_field(raw: bytes, values: list[str]) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(raw, type=Root)
    path = str(info.value).split(" - at `$", 1)[1].rstrip("`")
    assert enum_values(Root, path) == values


@pytest.mark.parametrize(
    ("path", "unknown", "hint"),
    [
        (".leaf", "knd", " (did you mean `kind`?)"),
        (".items[2]", "mdoe", " (did you mean `mode`?)"),
        (".by_name[...]", "zzz", " (known fields: kind, mode, count)"),
        ("", "other_name", " (did you mean `other-name`?)"),
    ],
)
def test_an_unknown_field_gets_the_close_name_or_the_known_ones(path: str, unknown: str, hint: str) -> None:
    assert with_close_field("unknown", Root, path, unknown) == f"unknown{hint}"


@pytest.mark.parametrize("path", [".leaf.count", ".nothing", "oops"])
def test_an_unknown_field_where_no_struct_is_keeps_the_reason(path: str) -> None:
    assert with_close_field("unknown", Root, path, "x") == "unknown"
