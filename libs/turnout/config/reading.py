"""A configuration file's text read into plain data, its `${...}` references kept as written (SPEC §11).

Owns: shielding each `${...}` from YAML (it is not a valid plain scalar in a
flow mapping: the SPEC's `{..., api_key: ${OPENAI_API_KEY}}`), reading the
text with `turnout.config.yaml_loader`, putting the references back, and a
YAML error's message pointed at the file's own text. The references are
replaced later (`turnout.config.environment`).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from turnout.config.yaml_loader import load_yaml
from turnout.errors import ConfigError

EXTENSION_PREFIX = "x-"
"""Top-level keys starting with it are the file's own (blocks for YAML anchors: `x-defaults: &d ...`),
read by YAML and then ignored."""

_ENV_REF = re.compile(r"""\$\{[^}\n"']*\}""")
"""A `${...}` to shield from YAML: no `}`, newline or quote inside (a quote closes the scalar it is in)."""


def _shield_env(text: str) -> tuple[str, re.Pattern[str], list[str]]:
    """Swap each `${...}` for a plain-scalar placeholder before YAML parsing.

    `${NAME}` is not a valid plain scalar inside a YAML flow mapping (the SPEC
    §11 example writes `{..., api_key: ${OPENAI_API_KEY}}`), so the text is
    parsed with placeholders that `_unshield` puts back afterwards.
    """
    prefix = "__turnout_env_"
    while prefix in text:
        prefix = "_" + prefix
    refs: list[str] = []

    def sub(m: re.Match[str]) -> str:
        refs.append(m.group(0))
        return f"{prefix}{len(refs) - 1}__"

    return _ENV_REF.sub(sub, text), re.compile(re.escape(prefix) + r"(\d+)__"), refs


def _unshield_mark(mark: Any, shielded: str, original: str, token: re.Pattern[str], refs: list[str]) -> None:
    """Point a PyYAML error mark of the shielded text at the same place in `original`.

    A placeholder is longer than most `${...}` it stands for, so the mark's
    column (and the snippet PyYAML quotes around it) would be off by the
    difference, and the snippet could show a cut placeholder. A mark inside
    a placeholder points at its reference's `$`. Line numbers need no
    change: neither a placeholder nor a reference holds a line break.
    """
    line_start = mark.pointer - mark.column
    before_line = in_line = 0
    for m in token.finditer(shielded):
        if m.start() >= mark.pointer:
            break
        shift = mark.pointer - m.start() if m.end() > mark.pointer else len(m.group(0)) - len(refs[int(m.group(1))])
        if m.start() >= line_start:
            in_line += shift
        else:
            before_line += shift
    mark.buffer = original + "\0"  # as PyYAML's reader holds a string
    mark.pointer = mark.index = mark.pointer - before_line - in_line
    mark.column -= in_line


def _unshield(node: Any, token: re.Pattern[str], refs: list[str]) -> Any:
    if isinstance(node, dict):
        return {_unshield(k, token, refs): _unshield(v, token, refs) for k, v in node.items()}
    if isinstance(node, list):
        return [_unshield(v, token, refs) for v in node]
    if isinstance(node, str):
        return token.sub(lambda m: refs[int(m.group(1))], node)
    return node


def read_document(text: str, source: str) -> dict[Any, Any]:
    """The YAML document `text` as plain data, `${...}` references as written, top-level
    `EXTENSION_PREFIX` keys dropped.

    Raises:
        ConfigError: `{source}: not valid YAML: ...` (the mark names `source` and points into
            `text`), or the document is not a mapping.
    """
    shielded, token, refs = _shield_env(text)
    try:
        data = _unshield(load_yaml(shielded), token, refs)
    except yaml.YAMLError as exc:
        for mark in (getattr(exc, "context_mark", None), getattr(exc, "problem_mark", None)):
            if mark is not None and mark.buffer is not None:
                mark.name = source  # PyYAML names a string `<unicode string>`: name the file instead
                _unshield_mark(mark, shielded, text, token, refs)
        shown = token.sub(lambda m: refs[int(m.group(1))], str(exc))  # the file's own text, not the placeholders
        raise ConfigError(f"{source}: not valid YAML: {shown}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping with `providers` and `models`")
    return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))}
