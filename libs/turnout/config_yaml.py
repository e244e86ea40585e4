"""YAML for configuration files: PyYAML's safe loader, refusing a key written twice in one mapping.

Owns: turning the file's text into plain data. YAML itself lets a later key
silently replace an earlier one (two `models:` sections, a model listed twice);
in a configuration that loses what the operator wrote, so it is an error here,
naming the key and both lines.
Must not import: anything of Turnout's.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode


class _UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` whose mappings refuse a repeated key."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
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


def load_yaml(text: str) -> Any:
    """The data of one YAML document (safe types only).

    Raises:
        yaml.YAMLError: not valid YAML, or a key repeated within one mapping
            (the message names the key and both lines).
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)
