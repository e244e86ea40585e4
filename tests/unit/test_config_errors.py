"""`turnout config check` reports every type error of a file at once (turnout.config.type_errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest

from turnout.config import check_scope_settings, load_config, parse_config
from turnout.config.findings import MAX_ERRORS, report
from turnout.config.type_errors import collect
from turnout.core.scopes import ScopeSettings
from turnout.errors import ConfigError
from turnout_cli.main import main

TWO_MISPLACED = """
providers:
  a: {kind: openaai, base_url: "http://x/v1", api_key: k}
models:
  m: {offers: [{provider: a, model: m, input_usd_per_mtok: cheap}], oder: priority}
breaker: {windw: 3, cooldown_s: -1}
gatway: {}
"""


def test_every_type_error_is_reported_in_one_run_with_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(TWO_MISPLACED, env={})
    assert str(info.value).splitlines() == [
        "gatway: unknown field `gatway` (did you mean `gateway`?)",
        "providers.a.kind: Invalid enum value 'openaai' (allowed: 'openai', 'openai_compatible', 'anthropic', 'azure_openai', 'bedrock', 'gemini', 'vertex')",
        "models.m.oder: unknown field `oder` (did you mean `order`?)",
        "models.m.offers[0].input_usd_per_mtok: Expected `float`, got `str` (a price in USD per million tokens, 0 to 1000000)",
        "breaker.windw: unknown field `windw` (did you mean `window`?)",
        "breaker.cooldown_s: Expected `float` > 0.0",
    ]


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    size: Annotated[int, msgspec.Meta(ge=1)] = 1


class Outer(msgspec.Struct, forbid_unknown_fields=True):
    items: list[Inner]
    by_name: dict[str, Inner] = {}
    mode: Literal["a", "b"] | None = None


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ({"items": []}, []),
        ({}, ["items: missing required field"]),
        (
            {"items": [{"name": "x", "size": 0}, {"nam": "y"}]},
            [
                "items[0].size: Expected `int` >= 1",
                "items[1].nam: unknown field `nam` (did you mean `name`?)",
                "items[1].name: missing required field",
            ],
        ),
        ({"items": [], "by_name": {"k": {"name": 3}}}, ["by_name.k.name: Expected `str`, got `int`"]),
        ({"items": [], "mode": "c"}, ["mode: Invalid enum value 'c' (allowed: 'a', 'b')"]),
        ({"items": [], "zzz": 1}, ["zzz: unknown field `zzz` (known fields: items, by_name, mode)"]),
        ("nope", ["<document>: Expected `object`, got `str`"]),
    ],
)
def test_collect_walks_structs_dicts_lists_and_literals(value: object, errors: list[str]) -> None:
    assert collect(value, Outer) == errors


def test_report_caps_the_number_of_lines() -> None:
    lines = report([f"e{i}" for i in range(MAX_ERRORS + 7)]).splitlines()
    assert len(lines) == MAX_ERRORS + 1 and lines[-1] == "... and 7 more"


def test_every_unset_environment_variable_is_reported_at_once() -> None:
    text = """
providers:
  a: {kind: openai, base_url: "https://a.example/v1", api_key: "${A_KEY}"}
  b: {kind: openai, base_url: "https://b.example/v1", api_key: "${B_KEY}"}
models:
  m: {offers: [{provider: a, model: m}]}
"""
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert info.value.errors == [
        "providers.a.api_key: environment variable A_KEY is not set (write ${A_KEY:-} to allow empty)",
        "providers.b.api_key: environment variable B_KEY is not set (write ${B_KEY:-} to allow empty)",
    ]


@pytest.mark.parametrize(
    ("value", "at"),
    [
        ('"${A_KEY"', 1),  # the closing brace outside the quotes
        ('"${A_KEY:-sk-default"', 1),
        ("${NOT VALID NAME}", 1),
        ('"sk-${A_KEY}-${B"', 13),  # a good reference, then a stray one
    ],
)
def test_a_dollar_brace_that_starts_no_reference_is_named_not_sent_as_a_key(value: str, at: int) -> None:
    text = f"""
providers:
  a: {{kind: openai, base_url: "https://a.example/v1", api_key: {value}}}
models:
  m: {{offers: [{{provider: a, model: m}}]}}
"""
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={"A_KEY": "k"})
    assert info.value.errors == [
        (
            f"providers.a.api_key: `${{` at character {at} does not start a variable reference: write ${{NAME}} or "
            "${NAME:-default} (NAME: letters, digits and _, not starting with a digit)"
        )
    ]
    assert "sk-default" not in str(info.value), "the value is not shown: it may be a key"


def test_a_yaml_error_shows_the_file_own_text_not_the_placeholders() -> None:
    text = "providers:\n  a: {kind: openai, api_key: ${A_KEY}, x: [}\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={}, source="f.yaml")
    assert "api_key: ${A_KEY}, x: [}" in str(info.value) and "__turnout_env_" not in str(info.value)


@pytest.mark.parametrize(
    "line",
    [
        '  a: {kind: openai_compatible, api_key: ${KEY}, base_url: "http://x" ]',  # a long line: the snippet is cut
        "  a: {api_key: ${KEY}, b: ${B:-x}} ]",  # two references before the fault
        "  a: {kind: openai, api_key: ${K}:}",  # the fault right after one
    ],
)
def test_a_yaml_errors_line_column_and_caret_point_into_the_files_own_text(line: str) -> None:
    text = f"x: ${{A}}\nproviders:\n{line}\n"
    fault = line.rindex("]") if "]" in line else line.rindex(":")
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={}, source="f.yaml")
    message = str(info.value)
    assert f'in "f.yaml", line 3, column {fault + 1}:' in message, message
    snippet, caret = message.splitlines()[-2:]
    assert caret.endswith("^") and snippet[len(caret) - 1] == line[fault], message
    assert "_env_" not in message


def test_a_range_error_says_the_rule_in_words_when_the_type_describes_it() -> None:
    described = Annotated[int, msgspec.Meta(ge=1, le=9, description="a digit from 1 to 9")]
    assert collect(0, described, "x") == ["x: Expected `int` >= 1 (a digit from 1 to 9)"]
    assert collect([5, 10], list[described], "xs") == ["xs[1]: Expected `int` <= 9 (a digit from 1 to 9)"]
    assert collect(0, Annotated[int, msgspec.Meta(ge=1)], "y") == ["y: Expected `int` >= 1"]


PROVIDER_A = """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: k}
"""


def test_every_range_of_the_gateway_routing_and_egress_sections_is_reported_in_one_run() -> None:
    text = (
        PROVIDER_A
        + """models:
  m: {offers: [{provider: a, model: m}]}
gateway: {max_body_bytes: 0, job_lease_s: 0.5}
routing: {speed_alpha: 1.5, speed_ttl_s: 0}
egress: {ports: [0, 443, 70000], allow: ["a b"]}
"""
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert [line.split(":")[0] for line in str(info.value).splitlines()] == [
        "gateway.max_body_bytes",
        "gateway.job_lease_s",
        "routing.speed_alpha",
        "routing.speed_ttl_s",
        "egress.ports[0]",
        "egress.ports[2]",
        "egress.allow[0]",
    ]
    assert "routing.speed_alpha: Expected `float` <= 1.0 (a weight in (0, 1])" in str(info.value)


def test_negative_prices_and_impossible_context_windows_are_refused_in_one_run() -> None:
    text = (
        PROVIDER_A
        + """models:
  m:
    context_window: -5
    offers: [{provider: a, model: m, input_usd_per_mtok: -1, output_usd_per_mtok: 2000000}]
"""
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert [line.split(":")[0] for line in str(info.value).splitlines()] == [
        "models.m.offers[0].input_usd_per_mtok",
        "models.m.offers[0].output_usd_per_mtok",
        "models.m.context_window",
    ]
    assert "(a price in USD per million tokens, 0 to 1000000)" in str(info.value)


def test_a_key_written_twice_in_one_mapping_is_refused_with_both_lines() -> None:
    text = (
        PROVIDER_A
        + """models:
  m: {offers: [{provider: a, model: m}]}
  m: {offers: [{provider: a, model: m2}]}
"""
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert "not valid YAML" in str(info.value) and "found the key 'm' a second time (first on line 5)" in str(
        info.value
    )
    assert "line 6" in str(info.value)


def test_a_yaml_error_names_the_file_not_pyyamls_string(tmp_path: Path) -> None:
    path = tmp_path / "turnout.yaml"
    path.write_text("providers: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f'in "{path}", line 2' in str(info.value) and "<unicode string>" not in str(info.value)


THREE_KINDS = """
providers:
  a: {kind: openai, base_url: "https://a.example/v1", api_key: k}
models:
  m: {offers: [{provider: azure-east, model: m}]}
gateway: {max_body_bytes: big}
breaker: {windw: 3}
"""
"""A type error, an unknown field with a close name and an offer naming an unknown provider."""
THREE_ERRORS = [
    "breaker.windw: unknown field `windw` (did you mean `window`?)",
    "gateway.max_body_bytes: Expected `int`, got `str`",
    "models.m.offers[0].provider: unknown provider 'azure-east'",
]


def test_errors_of_every_kind_are_reported_in_one_run() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(THREE_KINDS, env={})
    assert info.value.errors == THREE_ERRORS
    assert str(info.value).splitlines() == info.value.errors


def test_every_cross_check_of_a_file_is_reported_not_only_the_first() -> None:
    text = """
providers:
  a: {kind: openai, base_url: "https://a.example/v1?key=1", api_key: k}
models:
  m: {offers: [{provider: a, model: m}, {provider: b, model: m}]}
policy: {fallback: {models: [nope]}}
orgs:
  acme:
    squads: {}
    keys: [{name: k1, key: gateway-key-1, squad: research}]
"""
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert [line.split(":")[0] for line in info.value.errors] == [
        "providers.a.base_url",
        "models.m.offers[1].provider",
        "policy.fallback.models[0]",
        "orgs.acme.keys[0].squad",
    ]


def test_a_cross_check_waits_for_the_types_of_the_sections_it_reads() -> None:
    text = """
providers:
  a: {kind: openaai, base_url: "https://a.example/v1", api_key: k}
models:
  m: {offers: [{provider: a, model: m}]}
"""
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert len(info.value.errors) == 1 and info.value.errors[0].startswith("providers.a.kind: Invalid enum value")


def test_an_unset_variable_and_a_reference_to_turnouts_own_are_reported_together() -> None:
    text = """
providers:
  a: {kind: openai, base_url: "https://a.example/v1", api_key: "${TURNOUT_SECRET_KEY}"}
  b: {kind: openai, base_url: "https://b.example/v1", api_key: "${B_KEY}"}
models:
  m: {offers: [{provider: a, model: m}]}
"""
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={"TURNOUT_SECRET_KEY": "x"})
    assert [line.split(":")[0] for line in info.value.errors] == ["providers.a.api_key", "providers.b.api_key"]


def test_a_dict_key_of_the_wrong_type_is_named_with_its_mapping() -> None:
    assert collect({1: {"name": "x"}}, dict[str, Inner], "by_name") == ["by_name: Expected `str`, got `int`"]


def test_turnout_config_check_lists_the_three_errors_of_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "turnout.yaml"
    path.write_text(THREE_KINDS, encoding="utf-8")
    assert main(["config", "check", str(path)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"invalid: {path}: 3 error(s)", *(f"  {line}" for line in THREE_ERRORS)]


def test_a_scope_edit_is_refused_with_every_error_it_holds() -> None:
    config = parse_config(PROVIDER_A + "models:\n  m: {offers: [{provider: a, model: m}]}\n", env={})
    settings = ScopeSettings(reroutes=["nope"], fallbacks={"m": ["m"], "ghost": ["m"]})
    with pytest.raises(ConfigError) as info:
        check_scope_settings("squads.s.settings", settings, config, None)
    assert info.value.errors == [
        "squads.s.settings.reroutes[0]: unknown model 'nope' (not in `models`)",
        "squads.s.settings.fallbacks: unknown model 'ghost' (not in `models`)",
        "squads.s.settings.fallbacks: fallback cycle m -> m",
    ]


CLAMPED = """
providers:
  azure: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
models:
  m: {offers: [{provider: azrue, model: x}]}
policy: {retry: {stall_retries: 9, base_ms: 10}, budget: {max_attempts: 7}}
"""


def test_a_clamped_value_names_the_ceiling_that_bounds_it_and_an_unknown_provider_a_close_one() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(CLAMPED, env={})
    assert sorted(info.value.errors) == [
        "models.m.offers[0].provider: unknown provider 'azrue' (did you mean 'azure'?)",
        "policy.budget.max_attempts: 7 is outside the allowed range (at most 6: ceilings.max_attempts)",
        "policy.retry.base_ms: 10 is outside the allowed range (at least 250)",
        "policy.retry.stall_retries: 9 is outside the allowed range (at most 6: ceilings.max_retries)",
    ]
