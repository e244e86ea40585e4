"""Table tests for turnout.core.scopes (SPEC §6 "Scopes": org over squad over key)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from turnout.core.limits import Limits
from turnout.core.policy import PolicyOverrides, RetryOverrides
from turnout.core.scopes import (
    RESOLVED_NAMES,
    SETTING_NAMES,
    ScopeSettings,
    as_model_map,
    named_models,
    resolve_settings,
)
from turnout.core.spend import Budget, StrategyRule

EMPTY = ScopeSettings()

VALUES: dict[str, tuple[Any, Any, Any]] = {
    # setting: (org's value, squad's value, key's value)
    "reroutes": (["org-model"], ["squad-model"], ["key-model"]),
    "fallbacks": ({"*": ["org-fb"]}, ["squad-fb"], {"gpt-5": ["key-fb"]}),
    "policy": ({"retry": {"max_retries": 0}}, {"budget": {"max_attempts": 2}}, {"fallback": {"enabled": False}}),
    "key_mode": ("own_only", "own_then_shared", "shared_only"),
    "context_window_fallbacks": ({"*": ["org-cw"]}, {"*": ["squad-cw"]}, ["key-cw"]),
    "content_policy_fallbacks": (["org-cp"], ["squad-cp"], ["key-cp"]),
    "plan_fallbacks": ({"*": ["org-pc"]}, ["squad-pc"], ["key-pc"]),
    "budget": (Budget(usd=100), Budget(usd=10, period="day"), Budget(usd=1, hard=True)),
    "strategy": (
        [StrategyRule(name="o", at_percent=80, model="m")],
        [StrategyRule(name="s", at_percent=50, model="m")],
        [],
    ),
}

# (which scopes set the setting, which one wins); None = no scope sets it.
LAYERS = [
    ((True, True, True), 0),
    ((True, False, False), 0),
    ((True, True, False), 0),
    ((True, False, True), 0),
    ((False, True, True), 1),
    ((False, True, False), 1),
    ((False, False, True), 2),
    ((False, False, False), None),
]
LAYER_IDS = [
    "all-set-org-wins",
    "org-only",
    "org-over-squad",
    "org-over-key",
    "squad-over-key",
    "squad-only",
    "key-only",
    "none-set-stays-unset",
]


def scope(name: str, i: int, present: bool) -> ScopeSettings:
    return ScopeSettings(**{name: VALUES[name][i]}) if present else EMPTY


def test_every_setting_has_a_table_row() -> None:
    assert set(RESOLVED_NAMES) == set(VALUES)


def test_resolve_settings_leaves_limits_to_each_scope() -> None:
    org = ScopeSettings(limits=Limits(rpm=5))
    assert resolve_settings(org, None, ScopeSettings(limits=Limits(rpm=1))).limits is UNSET


@pytest.mark.parametrize("name", sorted(VALUES), ids=sorted(VALUES))
@pytest.mark.parametrize(("present", "winner"), LAYERS, ids=LAYER_IDS)
def test_resolve_settings_highest_scope_that_sets_a_setting_wins(
    name: str, present: tuple[bool, bool, bool], winner: int | None
) -> None:
    org, squad, key = (scope(name, i, p) for i, p in enumerate(present))
    resolved = resolve_settings(org, squad, key)
    assert getattr(resolved, name) == (UNSET if winner is None else VALUES[name][winner])


def test_resolve_settings_resolves_each_setting_independently() -> None:
    org = ScopeSettings(key_mode="shared_only")
    squad = ScopeSettings(reroutes=["claude"], key_mode="own_only")
    policy = PolicyOverrides(retry=RetryOverrides(max_retries=3))
    key = ScopeSettings(fallbacks=["gemini"], reroutes=["llama"], policy=policy)
    resolved = resolve_settings(org, squad, key)
    assert resolved == ScopeSettings(key_mode="shared_only", reroutes=["claude"], fallbacks=["gemini"], policy=policy)


@pytest.mark.parametrize(
    ("squad", "key", "expected"),
    [
        (None, None, ScopeSettings(key_mode="own_only")),
        (None, ScopeSettings(reroutes=["k"]), ScopeSettings(key_mode="own_only", reroutes=["k"])),
        (ScopeSettings(reroutes=["s"]), None, ScopeSettings(key_mode="own_only", reroutes=["s"])),
    ],
    ids=["no-squad-no-key", "no-squad", "no-key"],
)
def test_resolve_settings_with_missing_squad_or_key(
    squad: ScopeSettings | None, key: ScopeSettings | None, expected: ScopeSettings
) -> None:
    assert resolve_settings(ScopeSettings(key_mode="own_only"), squad, key) == expected


def test_resolve_settings_empty_values_are_set_not_inherit() -> None:
    # An empty list is a deliberate "none" and stops the fall-through; only UNSET inherits.
    resolved = resolve_settings(ScopeSettings(reroutes=[]), ScopeSettings(reroutes=["s"]), None)
    assert resolved.reroutes == []


def test_resolve_settings_of_nothing_is_all_unset() -> None:
    assert resolve_settings(EMPTY, None, None) == EMPTY
    assert all(getattr(EMPTY, n) is UNSET for n in SETTING_NAMES)


def test_scope_settings_decode_rejects_unknown_fields_and_bad_key_modes() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `reroute`"):
        msgspec.convert({"reroute": ["x"]}, ScopeSettings)
    with pytest.raises(msgspec.ValidationError, match="key_mode"):
        msgspec.convert({"key_mode": "byok"}, ScopeSettings)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (UNSET, {}),
        ([], {"*": ()}),
        (["a", "b"], {"*": ("a", "b")}),
        ({"gpt-5": ["a"], "*": ["b", "c"]}, {"gpt-5": ("a",), "*": ("b", "c")}),
        ({}, {}),
    ],
    ids=["unset", "empty-list", "plain-list-means-star", "map", "empty-map"],
)
def test_as_model_map(value: Any, expected: dict[str, tuple[str, ...]]) -> None:
    assert as_model_map(value) == expected


def test_named_models_lists_every_model_a_scope_names_with_its_path() -> None:
    settings = msgspec.convert(
        {
            "reroutes": ["r"],
            "fallbacks": {"*": ["f1", "custom:vllm:f2"]},
            "context_window_fallbacks": ["cw"],
            "plan_fallbacks": {"m": ["pc"]},
            "policy": {"fallback": {"models": ["pf"]}},
            "strategy": [{"name": "eco", "at_percent": 80, "model": "s", "fallback": "sf"}],
        },
        ScopeSettings,
    )
    assert list(named_models(settings)) == [
        ("reroutes[0]", "r"),
        ("fallbacks.*", "*"),
        ("fallbacks.*[0]", "f1"),
        ("fallbacks.*[1]", "custom:vllm:f2"),
        ("context_window_fallbacks[0]", "cw"),
        ("plan_fallbacks.m", "m"),
        ("plan_fallbacks.m[0]", "pc"),
        ("policy.fallback.models[0]", "pf"),
        ("strategy[0].model", "s"),
        ("strategy[0].fallback", "sf"),
    ]
    assert list(named_models(EMPTY)) == []
