"""`load_yaml`: anchors and aliases within bounds, no value containing itself, bounded nesting."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from turnout.config import parse_config, yaml_loader
from turnout.config.yaml_loader import MAX_DEPTH, load_yaml
from turnout.errors import ConfigError


def _laughs(levels: int, width: int = 10) -> str:
    """A list of `width` scalars, then `levels` lists of `width` aliases of the list before."""
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_anchors_aliases_and_merge_keys_still_read_as_copies() -> None:
    text = """
base: &base {kind: openai, timeout_ms: 100}
a: {<<: *base, base_url: "http://a/v1"}
b: {<<: *base, timeout_ms: 200}
offers: &offers [{provider: a, model: m}]
models: {m: {offers: *offers}, n: {offers: *offers}}
"""
    data = load_yaml(text)
    assert data["a"] == {"kind": "openai", "timeout_ms": 100, "base_url": "http://a/v1"}
    assert data["b"] == {"kind": "openai", "timeout_ms": 200}
    assert data["models"]["m"]["offers"] == data["models"]["n"]["offers"] == [{"provider": "a", "model": "m"}]
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml("base: &base {k: 1}\nc: {<<: *base, x: 1, x: 2}\n")
    assert "found the key 'x' a second time" in str(info.value)


@pytest.mark.parametrize(
    ("text", "alias", "line"),
    [
        ("a: &a [*a]\n", "a", 1),
        ("top:\n  m: &m {child: {again: *m}}\n", "m", 2),
        ("x: 1\nl: &l\n  - 1\n  - [2, *l]\n", "l", 4),
    ],
)
def test_an_alias_inside_its_own_anchor_is_refused_with_its_line(text: str, alias: str, line: int) -> None:
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml(text)
    message = str(info.value)
    assert f"found the alias *{alias} inside the value its anchor &{alias} names" in message
    assert f"line {line}," in message


def test_aliases_of_aliases_are_capped_before_any_value_is_built() -> None:
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml(_laughs(levels=8))  # a hundred million values if copied out
    assert "stand for more than 100,000 values" in str(info.value)


def test_the_alias_cap_counts_each_alias_as_a_copy_of_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    # l1 adds 10 copies of l0 (11 values each: the list and its 10 scalars) = 110 values;
    # l2 adds 10 copies of l1 (1 + 110) = 1,110 values: 1,220 in all.
    monkeypatch.setattr(yaml_loader, "MAX_ALIAS_VALUES", 1_220)
    assert len(load_yaml(_laughs(levels=2))["l2"]) == 10
    monkeypatch.setattr(yaml_loader, "MAX_ALIAS_VALUES", 1_219)
    with pytest.raises(yaml.YAMLError):
        load_yaml(_laughs(levels=2))


def test_nesting_is_capped_at_max_depth() -> None:
    def nested(levels: int) -> str:  # the document's mapping is one level, each list one more
        return "a: " + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "\n"

    value = load_yaml(nested(MAX_DEPTH))["a"]
    for _ in range(MAX_DEPTH - 2):
        value = value[0]
    assert value == [1]
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml(nested(MAX_DEPTH + 1))
    assert f"found a value nested more than {MAX_DEPTH} levels deep" in str(info.value)
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: " + "[" * 5_000 + "]" * 5_000 + "\n")  # Python's recursion limit is never reached


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: &a [*a]\n", "found the alias *a inside the value its anchor &a names"),
        (_laughs(levels=8), "stand for more than 100,000 values"),
        ("a: " + "[" * 5_000 + "]" * 5_000 + "\n", "nested more than 100 levels deep"),
    ],
)
def test_a_configuration_file_gets_one_clear_error(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert "not valid YAML: " in str(info.value) and len(str(info.value).splitlines()) <= 5
    assert expected in str(info.value)


_TEXTS = st.text(max_size=8).filter(lambda t: not yaml_loader._EXPONENT_FLOAT.match(t))
"""Text a YAML 1.1 emitter (PyYAML's dump) leaves unquoted although YAML 1.2, and so this loader,
reads it as a number (`0E0`, `1e5`): such text is quoted in a configuration, as in any YAML 1.2 file."""
_SCALARS = st.one_of(st.integers(), st.booleans(), st.none(), _TEXTS)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXTS, inner, max_size=4)),
    max_leaves=30,
)


@given(_VALUES)
def test_any_plain_document_reads_back_as_written(value: Any) -> None:
    assert load_yaml(yaml.safe_dump({"v": value})) == {"v": value}


@pytest.mark.parametrize(
    ("written", "read"),
    [("1e300", 1e300), ("2E-3", 0.002), ("-1e3", -1000.0), ("1_000e2", 100000.0), ("1.5e+3", 1500.0)],
)
def test_a_number_with_an_exponent_is_a_float_as_in_yaml_1_2(written: str, read: float) -> None:
    assert load_yaml(f"n: {written}\n") == {"n": read}


@pytest.mark.parametrize("written", ["'1e3'", "1e", "e5", "1e3x", "abc1e3"])
def test_what_is_not_such_a_number_stays_text(written: str) -> None:
    assert isinstance(load_yaml(f"n: {written}\n")["n"], str)


def test_an_exponent_past_a_floats_range_is_an_error_naming_its_line() -> None:
    with pytest.raises(yaml.YAMLError, match=r"the number 1e400 is out of range[\s\S]*line 2, column 4"):
        load_yaml("a: 1\nb: 1e400\n")
