"""YAML for configuration files: PyYAML's safe loader, refusing a key written twice in one
mapping, a value that contains itself, and values nested or multiplied past sane bounds.

Owns: turning the file's text into plain data. YAML itself lets a later key
silently replace an earlier one (two `models:` sections, a model listed twice);
in a configuration that loses what the operator wrote, so it is an error here,
naming the key and both lines.

Anchors and aliases (`&defaults` / `*defaults`) stay allowed, within bounds
checked while the file is read, before any value is built:
- an alias inside the value its own anchor names (`a: &a [*a]`) would make
  a value that contains itself, which no setting can be;
- aliases of aliases multiply (ten aliases of a list of ten aliases of ...
  a few hundred bytes that stand for a hundred million values), so the
  values the aliases add, counted as if copied out, are capped
  (`MAX_ALIAS_VALUES`);
- nesting is capped (`MAX_DEPTH`): reading a value nested thousands of
  levels deep would exhaust Python's recursion limit.
Each is a `yaml.YAMLError` naming the line, as any other malformed file.
A number with an exponent (`1e300`) is read as a float, as YAML 1.2 and
JSON read it (PyYAML's YAML 1.1 rules wanted a dot and a signed exponent).
Must not import: anything of Turnout's (the rest of `turnout.config` reads it).
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node

MAX_DEPTH = 100
"""Deepest nesting of mappings and lists a configuration file may have (levels; the document's
own mapping is the first)."""

MAX_ALIAS_VALUES = 100_000
"""Most values (scalars, lists, mappings) a file's aliases may add, counted as if each alias were
a copy of the value its anchor names."""


_MERGE = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` whose mappings refuse a repeated key (a merge key's `<<: *x` keys
    excepted: the mapping overrides them), and which refuses a value containing itself and
    nesting or alias expansion past the bounds (module doc)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._values = 0  # values composed so far, an alias counting as a copy of its anchor's
        self._alias_values = 0  # of which the aliases added
        self._open: set[str] = set()  # anchors whose values are being composed
        self._sizes: dict[str, int] = {}  # anchor -> values of the value it names

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """The next node, refusing a value that contains itself, alias expansion past
        `MAX_ALIAS_VALUES` and nesting past `MAX_DEPTH` (`yaml.composer.ComposerError`)."""
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = event.anchor
        if self.check_event(AliasEvent):
            if anchor in self._open:
                raise ComposerError(
                    None,
                    None,
                    f"found the alias *{anchor} inside the value its anchor &{anchor} names: "
                    "a value cannot contain itself",
                    event.start_mark,
                )
            node: Node | None = super().compose_node(parent, index)
            added = self._sizes.get(anchor, 1)
            self._values += added
            self._alias_values += added
            if self._alias_values > MAX_ALIAS_VALUES:
                raise ComposerError(
                    None,
                    None,
                    f"found the alias *{anchor}, past which the file's aliases stand for more than "
                    f"{MAX_ALIAS_VALUES:,} values",
                    event.start_mark,
                )
            return node
        nests = self.check_event(SequenceStartEvent, MappingStartEvent)
        if nests and self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"found a value nested more than {MAX_DEPTH} levels deep", event.start_mark)
        first = self._values
        self._values += 1
        self._depth += nests
        if anchor is not None:
            self._open.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= nests
            if anchor is not None:
                self._open.discard(anchor)
        if anchor is not None:
            self._sizes[anchor] = self._values - first
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *defaults`: its keys may be overridden here (YAML 1.1 merge)
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: the base loader reports it
            if first is not key_node:
                raise ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found the key {key!r} a second time (first on line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
"""A number written with an exponent and no dot or sign in it (`1e300`, `2E-3`): a float in YAML
1.2 and JSON, but a string to PyYAML's YAML 1.1 rules, which want `1.0e+300`. A setting typed as
a number then said "Expected `float`, got `str`" of what reads as one."""
_EXPONENT_TAG = "tag:turnout,2026:exponent-float"


def _exponent_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    """The float a `_EXPONENT_FLOAT` scalar writes; one past a float's range (`1e400`) is an error
    naming its line, not infinity."""
    value = float(str(loader.construct_scalar(node)).replace("_", ""))
    if math.isinf(value):
        raise ConstructorError(None, None, f"the number {node.value[:40]} is out of range", node.start_mark)
    return value


_UniqueKeyLoader.add_implicit_resolver(_EXPONENT_TAG, _EXPONENT_FLOAT, list("-+0123456789"))
_UniqueKeyLoader.add_constructor(_EXPONENT_TAG, _exponent_float)


def load_yaml(text: str) -> Any:
    """The data of one YAML document (safe types only).

    Raises:
        yaml.YAMLError: not valid YAML, a key repeated within one mapping
            (the message names the key and both lines), an alias inside the
            value of its own anchor, more than `MAX_ALIAS_VALUES` values added
            by aliases, or nesting deeper than `MAX_DEPTH` (module doc).
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)
