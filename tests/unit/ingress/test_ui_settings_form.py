"""The dashboard's settings form (#45 item 8): a scope's settings as the form's texts, the form
back as the admin API's `PATCH .../settings` body (only what changed), and the diff of a change."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from turnout.core.policy import FallbackOverrides, RetryOverrides
from turnout.core.scopes import SETTING_NAMES, ScopeSettings
from turnout_ingress.ui.settings_form import FIELDS, GROUPS, Change, FormError, diff, field_of, form_values, to_patch


def settings(**values: Any) -> ScopeSettings:
    return msgspec.convert(values, ScopeSettings)


CURRENT = settings(
    fallbacks=["small", "big"],
    budget={"usd": 250, "period": "month"},
    policy={"retry": {"max_retries": 2, "retry_on_status": [429, "5xx"]}},
    limits={"rpm": 600},
)


def test_every_setting_and_every_policy_field_has_a_form_field() -> None:
    names = {f.name for f in FIELDS}
    tops = {f.setting for f in FIELDS}
    assert tops == set(SETTING_NAMES)
    for section, cls in (("retry", RetryOverrides), ("fallback", FallbackOverrides)):
        assert {f"policy.{section}.{n}" for n in cls.__struct_fields__} <= names
    kinds = {f.name: f.kind for f in FIELDS}
    assert kinds["policy.retry.max_retries"] == "int"
    assert kinds["policy.retry.retry_on_status"] == "statuses"
    assert kinds["policy.fallback.models"] == "list"
    assert kinds["policy.fallback.enabled"] == "bool"
    assert kinds["fallbacks"] == "map" and kinds["strategy"] == "json" and kinds["budget.usd"] == "float"
    assert {f.name: f.choices for f in FIELDS}["key_mode"] == ("own_only", "own_then_shared", "shared_only")
    assert GROUPS[0] == "routing" and "policy.retry" in GROUPS and "limits" in GROUPS


def test_the_form_shows_a_scopes_own_settings_and_leaves_the_rest_empty() -> None:
    values = form_values(CURRENT)
    assert values["fallbacks"] == "small, big"
    assert values["budget.usd"] == "250" and values["budget.period"] == "month" and values["budget.hard"] == "false"
    assert values["policy.retry.max_retries"] == "2"
    assert values["policy.retry.retry_on_status"] == "429, 5xx"
    assert values["limits.rpm"] == "600" and values["limits.tpm"] == ""
    assert values["key_mode"] == "" and values["reroutes"] == ""
    assert form_values(settings(fallbacks={"gpt": ["a", "b"], "*": ["c"]}))["fallbacks"] == "gpt: a, b\n*: c"


def test_an_unchanged_form_is_an_empty_patch() -> None:
    assert to_patch(form_values(CURRENT), CURRENT) == {}
    assert to_patch(form_values(ScopeSettings()), ScopeSettings()) == {}


@pytest.mark.parametrize(
    ("edits", "patch"),
    [
        ({"policy.retry.max_retries": "3"}, {"policy": {"retry": {"max_retries": 3, "retry_on_status": [429, "5xx"]}}}),
        ({"fallbacks": "chat: small\n*: big"}, {"fallbacks": {"chat": ["small"], "*": ["big"]}}),
        ({"fallbacks": "small,big,tiny"}, {"fallbacks": ["small", "big", "tiny"]}),
        ({"fallbacks": ""}, {"fallbacks": None}),  # empty: back to inherit
        ({"budget.usd": "", "budget.period": "", "budget.hard": ""}, {"budget": None}),
        ({"budget.hard": "true"}, {"budget": {"usd": 250.0, "period": "month", "hard": True}}),
        ({"limits.rpm": "", "limits.tpm": "1000"}, {"limits": {"tpm": 1000}}),
        ({"key_mode": "own_only", "reroutes": "small"}, {"key_mode": "own_only", "reroutes": ["small"]}),
        (
            {"policy.fallback.on_status": "408 429 5xx"},
            {
                "policy": {
                    "retry": {"max_retries": 2, "retry_on_status": [429, "5xx"]},
                    "fallback": {"on_status": [408, 429, "5xx"]},
                }
            },
        ),
        (
            {"strategy": '[{"name": "cheap", "at_percent": 80, "model": "small"}]'},
            {"strategy": [{"name": "cheap", "at_percent": 80.0, "model": "small", "fallback": None}]},
        ),
    ],
)
def test_the_form_becomes_a_patch_of_only_the_settings_it_changes(edits: dict[str, str], patch: dict[str, Any]) -> None:
    assert to_patch({**form_values(CURRENT), **edits}, CURRENT) == patch


def test_text_the_form_cannot_read_as_a_number_is_passed_on_for_the_admin_api_to_refuse() -> None:
    form = {**form_values(CURRENT), "limits.rpm": "many", "policy.retry.base_ms": "1.5", "budget.usd": "nan"}
    patch = to_patch(form, CURRENT)
    assert patch["limits"] == {"rpm": "many"}
    assert patch["policy"]["retry"]["base_ms"] == 1.5  # a number: "not a whole number", not "text"
    assert patch["budget"]["usd"] == "nan"  # no finite number: text


def test_a_strategy_that_is_not_json_is_refused_naming_its_field() -> None:
    with pytest.raises(FormError) as caught:
        to_patch({**form_values(CURRENT), "strategy": "[{"}, CURRENT)
    assert caught.value.name == "strategy"
    assert caught.value.message.startswith("settings.strategy: not valid JSON:")


def test_the_diff_names_each_changed_leaf_old_and_new() -> None:
    new = settings(
        fallbacks={"chat": ["small"]},
        policy={"retry": {"max_retries": 4, "retry_on_status": [429, "5xx"]}, "budget": {"max_attempts": 3}},
        limits={"rpm": 600, "tpm": 100},
        key_mode="own_only",
    )
    assert diff(CURRENT, new) == [
        Change(path="fallbacks", old="small, big", new="chat: small"),
        Change(path="policy.retry.max_retries", old="2", new="4"),
        Change(path="policy.budget.max_attempts", old="", new="3"),
        Change(path="key_mode", old="", new="own_only"),
        Change(path="budget.usd", old="250", new=""),
        Change(path="budget.period", old="month", new=""),
        Change(path="budget.hard", old="false", new=""),
        Change(path="limits.tpm", old="", new="100"),
    ]
    assert diff(CURRENT, CURRENT) == []


@pytest.mark.parametrize(
    ("param", "field"),
    [
        ("settings.policy.retry.max_retries", "policy.retry.max_retries"),
        ("settings.fallbacks.gpt-5[0]", "fallbacks"),
        ("settings.fallbacks[1]", "fallbacks"),
        ("settings.budget", "budget"),
        ("settings.budget.usd", "budget.usd"),
        ("settings.limits.rpm", "limits.rpm"),
        ("settings.policy.retry", "policy.retry"),
        ("body", None),
        (None, None),
    ],
)
def test_an_admin_errors_param_finds_its_field(param: str | None, field: str | None) -> None:
    assert field_of(param) == field


def test_the_saved_notice_says_only_what_the_dashboards_own_redirects_write() -> None:
    from turnout_ingress.ui.pages.settings import saved_names

    assert saved_names("limits,policy.retry.max_retries") == ["limits", "policy.retry.max_retries"]
    assert saved_names("revoked") == ["revoked"]
    assert saved_names("provider key openai removed") == ["provider key openai removed"]
    assert saved_names("<b>hacked</b> you have been logged out,limits") == ["limits"]
    assert saved_names("") == []
