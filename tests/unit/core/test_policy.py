"""Table tests for turnout.core.policy (SPEC §4 policy, ceilings, clamping)."""

from __future__ import annotations

import json
import typing
from typing import Any

import msgspec
import pytest
from msgspec import UnsetType

from turnout.core.policy import (
    BASE_MS_RANGE,
    SECTION_OVERRIDES,
    BudgetPolicy,
    Ceilings,
    Clamp,
    FallbackPolicy,
    Policy,
    PolicyOverrides,
    RetryPolicy,
    clamp_policy,
    merge_policy,
    with_override,
)

SPEC_POLICY_JSON = """
{
  "retry":    {"max_retries": 1, "retry_on_status": [429, 500, 502, 503, 529],
               "base_ms": 250, "max_ms": 8000, "respect_retry_after": true,
               "per_attempt_timeout_ms": 120000, "fallback_target_retries": 0},
  "fallback": {"enabled": true, "cross_provider_same_model": true,
               "models": [], "backoff_ms": 0,
               "on_status": [408, 429, "5xx"], "max_cycles": 1},
  "budget":   {"max_attempts": 6, "max_total_latency_ms": 180000}
}
"""
"""SPEC §4, verbatim."""

# Fields beyond the SPEC's JSON (streaming knobs of SPEC §8); both off by default.
EXTENSIONS = {
    "retry": {"ttft_timeout_ms": 0, "stall_timeout_ms": 0, "stall_retries": 0, "stream_recovery": "none"},
    "fallback": {"credential_fallback": True, "on_exhausted": "gateway", "comparable": False, "only": []},
    "budget": {},
}


def _replace(policy: Policy, section: str, **fields: Any) -> Policy:
    return msgspec.structs.replace(policy, **{section: msgspec.structs.replace(getattr(policy, section), **fields)})


# --------------------------------------------------------------------- defaults


def test_policy_defaults_equal_spec_json_exactly() -> None:
    spec = json.loads(SPEC_POLICY_JSON)
    ours = json.loads(msgspec.json.encode(Policy()))
    for section, fields in spec.items():
        extra = {k: v for k, v in ours[section].items() if k not in fields}
        assert {k: ours[section][k] for k in fields} == fields, section
        assert extra == EXTENSIONS[section], section
    assert set(ours) == set(spec) | {"plan", "pinned"}
    assert ours["plan"] == {"max_offers": 3}  # SPEC §10: "at most max_offers offers per request (default 3)"
    assert ours["pinned"] == {"allow_other_providers": False}  # seed 001: only that provider's offers


def test_policy_spec_json_decodes_to_defaults() -> None:
    assert msgspec.json.decode(SPEC_POLICY_JSON, type=Policy) == Policy()
    assert merge_policy(Policy(), json.loads(SPEC_POLICY_JSON)) == Policy()


def test_ceilings_defaults_are_the_spec_ones() -> None:
    assert msgspec.to_builtins(Ceilings()) == {
        "max_retries": 6,
        "max_attempts": 6,
        "max_total_latency_ms": 180_000,
        "max_cycles": 3,
        "max_offers": 20,  # beyond the SPEC's list: the bound of plan.max_offers (§10)
    }


def test_policy_rejects_unknown_fields_when_decoded() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `bogus`"):
        msgspec.json.decode(b'{"retry": {"bogus": 1}}', type=Policy)


# --------------------------------------------------------------------- merge


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({}, Policy()),
        ({"retry": {"max_retries": 3}}, _replace(Policy(), "retry", max_retries=3)),
        (
            {"retry": {"retry_on_status": [503, "5xx"]}},
            _replace(Policy(), "retry", retry_on_status=(503, "5xx")),
        ),
        (
            {"fallback": {"enabled": False, "models": ["b", "c"]}},
            _replace(Policy(), "fallback", enabled=False, models=("b", "c")),
        ),
        ({"budget": {"max_attempts": 2}}, _replace(Policy(), "budget", max_attempts=2)),
        ({"retry": None}, Policy()),
        (
            {"retry": {"base_ms": 500}, "budget": {"max_total_latency_ms": 9000}},
            _replace(_replace(Policy(), "retry", base_ms=500), "budget", max_total_latency_ms=9000),
        ),
    ],
    ids=[
        "empty",
        "one-field",
        "status-list-with-class",
        "fallback-section",
        "budget-section",
        "null-section-keeps-base",
        "two-sections",
    ],
)
def test_merge_policy_overlays_only_the_given_fields(override: dict[str, Any], expected: Policy) -> None:
    assert merge_policy(Policy(), override) == expected


def test_merge_policy_keeps_the_lower_layers_values_not_the_defaults() -> None:
    gateway = merge_policy(Policy(), {"retry": {"max_retries": 4, "base_ms": 1000}})
    merged = merge_policy(gateway, {"retry": {"base_ms": 2000}})
    assert merged.retry.max_retries == 4
    assert merged.retry.base_ms == 2000
    assert merged.fallback == FallbackPolicy()


def test_merge_policy_does_not_change_its_base() -> None:
    base = Policy()
    merge_policy(base, {"retry": {"max_retries": 5}})
    assert base == Policy()


@pytest.mark.parametrize(
    ("override", "path", "what"),
    [
        ({"bogus": {}}, None, "unknown field `bogus`"),
        ({"retry": {"bogus": 1}}, "$.retry", "unknown field `bogus`"),
        ({"fallback": {"max_cycle": 2}}, "$.fallback", "unknown field `max_cycle`"),
        ({"budget": {"max_attempts": "six"}}, "$.budget.max_attempts", "Expected `int`, got `str`"),
        ({"retry": 3}, "$.retry", "Expected `object | null`, got `int`"),
        ({"retry": {"retry_on_status": [1.5]}}, "$.retry.retry_on_status[0]", "Expected `int | str`"),
        ({"fallback": {"enabled": "yes"}}, "$.fallback.enabled", "Expected `bool`"),
    ],
    ids=[
        "unknown-section",
        "unknown-retry-field",
        "unknown-fallback-field",
        "wrong-type",
        "section-not-object",
        "status-entry-float",
        "bool-field-string",
    ],
)
def test_merge_policy_errors_name_the_path(override: dict[str, Any], path: str | None, what: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        merge_policy(Policy(), override)
    message = str(info.value)
    assert what in message
    if path is not None:
        assert message.endswith(f"- at `{path}`")


# (section.field, the least value its domain holds)
FLOORS: list[tuple[str, int]] = [
    ("retry.max_retries", 0),
    ("retry.base_ms", 0),
    ("retry.max_ms", 0),
    ("retry.per_attempt_timeout_ms", 1),
    ("retry.fallback_target_retries", 0),
    ("retry.ttft_timeout_ms", 0),
    ("retry.stall_timeout_ms", 0),
    ("retry.stall_retries", 0),
    ("fallback.backoff_ms", 0),
    ("fallback.max_cycles", 1),
    ("budget.max_attempts", 1),
    ("budget.max_total_latency_ms", 1),
    ("plan.max_offers", 1),
]


@pytest.mark.parametrize(("path", "floor"), FLOORS, ids=[path for path, _ in FLOORS])
def test_a_partial_policy_below_a_fields_domain_is_refused_naming_the_field(path: str, floor: int) -> None:
    section, name = path.split(".")
    for value in (floor - 1, -1, -(10**12)):
        with pytest.raises(msgspec.ValidationError) as info:
            merge_policy(Policy(), {section: {name: value}})
        assert str(info.value) == f"Expected `int` >= {floor} - at `$.{path}`"
    merged = merge_policy(Policy(), {section: {name: floor}})  # the floor itself is in the domain
    assert getattr(getattr(merged, section), name) == floor


def test_every_number_of_a_partial_policy_has_its_floor_in_the_table() -> None:
    numbers = {
        f"{section}.{name}"
        for section, tp in SECTION_OVERRIDES.items()
        for name, hint in typing.get_type_hints(tp, include_extras=True).items()
        if "int" in str(hint) and "tuple" not in str(hint)
    }
    assert numbers == {path for path, _ in FLOORS}


# --------------------------------------------------------------------- clamp


def built(fields: dict[str, dict[str, int]]) -> Policy:
    """`Policy()` with `fields` set as a policy built in code is, outside any decode (so outside the
    partial policy's domain too): what `clamp_policy` still brings within range."""
    base = Policy()
    sections = {name: msgspec.structs.replace(getattr(base, name), **values) for name, values in fields.items()}
    return msgspec.structs.replace(base, **sections)


def test_clamp_policy_leaves_defaults_alone() -> None:
    assert clamp_policy(Policy(), Ceilings()) == (Policy(), ())


def test_clamp_policy_leaves_values_at_the_ceilings_alone() -> None:
    at_ceiling = merge_policy(
        Policy(),
        {
            "retry": {"max_retries": 6, "fallback_target_retries": 6, "base_ms": 60_000, "max_ms": 60_000},
            "fallback": {"max_cycles": 3, "backoff_ms": 60_000},
            "budget": {"max_attempts": 6, "max_total_latency_ms": 180_000},
        },
    )
    assert clamp_policy(at_ceiling, Ceilings()) == (at_ceiling, ())


CLAMPS: list[tuple[dict[str, Any], str, int, int]] = [
    ({"retry": {"max_retries": 7}}, "retry.max_retries", 7, 6),
    ({"retry": {"max_retries": -1}}, "retry.max_retries", -1, 0),
    ({"retry": {"fallback_target_retries": 9}}, "retry.fallback_target_retries", 9, 6),
    ({"retry": {"fallback_target_retries": -2}}, "retry.fallback_target_retries", -2, 0),
    ({"retry": {"base_ms": 100}}, "retry.base_ms", 100, BASE_MS_RANGE[0]),
    ({"retry": {"base_ms": -5}}, "retry.base_ms", -5, 250),
    ({"retry": {"base_ms": 60_001, "max_ms": 90_000}}, "retry.base_ms", 60_001, BASE_MS_RANGE[1]),
    ({"retry": {"base_ms": 1000, "max_ms": 500}}, "retry.max_ms", 500, 1000),
    ({"retry": {"max_ms": -1}}, "retry.max_ms", -1, 250),
    ({"retry": {"max_ms": 3_600_001}}, "retry.max_ms", 3_600_001, 3_600_000),
    ({"retry": {"per_attempt_timeout_ms": 200_000}}, "retry.per_attempt_timeout_ms", 200_000, 180_000),
    ({"retry": {"per_attempt_timeout_ms": 0}}, "retry.per_attempt_timeout_ms", 0, 1),
    ({"retry": {"ttft_timeout_ms": 181_000}}, "retry.ttft_timeout_ms", 181_000, 180_000),
    ({"retry": {"ttft_timeout_ms": -1}}, "retry.ttft_timeout_ms", -1, 0),
    ({"retry": {"stall_timeout_ms": 999_999}}, "retry.stall_timeout_ms", 999_999, 180_000),
    ({"fallback": {"backoff_ms": 60_001}}, "fallback.backoff_ms", 60_001, 60_000),
    ({"fallback": {"backoff_ms": -10}}, "fallback.backoff_ms", -10, 0),
    ({"fallback": {"max_cycles": 4}}, "fallback.max_cycles", 4, 3),
    ({"fallback": {"max_cycles": 0}}, "fallback.max_cycles", 0, 1),
    ({"budget": {"max_attempts": 7}}, "budget.max_attempts", 7, 6),
    ({"budget": {"max_attempts": 0}}, "budget.max_attempts", 0, 1),
    ({"budget": {"max_attempts": -3}}, "budget.max_attempts", -3, 1),
    ({"budget": {"max_total_latency_ms": 180_001}}, "budget.max_total_latency_ms", 180_001, 180_000),
    ({"budget": {"max_total_latency_ms": 0}}, "budget.max_total_latency_ms", 0, 1),
]


@pytest.mark.parametrize(
    ("override", "path", "requested", "applied"),
    CLAMPS,
    ids=[f"{path}-{'up' if applied > requested else 'down'}-{requested}" for _, path, requested, applied in CLAMPS],
)
def test_clamp_policy_reports_each_clamp(override: dict[str, Any], path: str, requested: int, applied: int) -> None:
    policy, clamps = clamp_policy(built(override), Ceilings())
    assert clamps == (Clamp(path=path, requested=requested, applied=applied),)
    section, name = path.split(".")
    assert getattr(getattr(policy, section), name) == applied


def test_clamp_policy_max_ms_follows_a_clamped_base() -> None:
    policy, clamps = clamp_policy(merge_policy(Policy(), {"retry": {"base_ms": 100, "max_ms": 200}}), Ceilings())
    assert policy.retry.base_ms == 250
    assert policy.retry.max_ms == 250
    assert clamps == (
        Clamp(path="retry.base_ms", requested=100, applied=250),
        Clamp(path="retry.max_ms", requested=200, applied=250),
    )


def test_clamp_policy_reports_every_clamp_at_once() -> None:
    over = Policy(
        retry=RetryPolicy(max_retries=10),
        fallback=FallbackPolicy(max_cycles=10),
        budget=BudgetPolicy(max_attempts=10, max_total_latency_ms=10**9),
    )
    _, clamps = clamp_policy(over, Ceilings())
    assert {c.path for c in clamps} == {
        "retry.max_retries",
        "fallback.max_cycles",
        "budget.max_attempts",
        "budget.max_total_latency_ms",
    }


@pytest.mark.parametrize(
    ("ceilings", "path", "applied"),
    [
        (Ceilings(max_retries=0), "retry.max_retries", 0),
        (Ceilings(max_attempts=3), "budget.max_attempts", 3),
        (Ceilings(max_cycles=1, max_attempts=6), None, None),
        (Ceilings(max_total_latency_ms=60_000), "budget.max_total_latency_ms", 60_000),
    ],
    ids=["retries-ceiling-0", "attempts-ceiling-3", "cycles-ceiling-1-default-fits", "latency-ceiling-60s"],
)
def test_clamp_policy_uses_the_operators_ceilings(ceilings: Ceilings, path: str | None, applied: int | None) -> None:
    policy, clamps = clamp_policy(Policy(), ceilings)
    if path is None:
        assert clamps == ()
        return
    assert path in {c.path for c in clamps}
    section, name = path.split(".")
    assert getattr(getattr(policy, section), name) == applied


def test_clamp_policy_lower_latency_ceiling_also_caps_the_attempt_timeout() -> None:
    policy, clamps = clamp_policy(Policy(), Ceilings(max_total_latency_ms=60_000))
    assert policy.retry.per_attempt_timeout_ms == 60_000
    assert Clamp(path="retry.per_attempt_timeout_ms", requested=120_000, applied=60_000) in clamps


def test_clamp_policy_keeps_non_numeric_fields() -> None:
    policy = merge_policy(
        Policy(),
        {
            "retry": {"retry_on_status": ["5xx"], "respect_retry_after": False, "max_retries": 99},
            "fallback": {"enabled": False, "models": ["x"], "on_status": [503]},
        },
    )
    clamped, _ = clamp_policy(policy, Ceilings())
    assert clamped.retry.retry_on_status == ("5xx",)
    assert clamped.retry.respect_retry_after is False
    assert clamped.fallback.enabled is False
    assert clamped.fallback.models == ("x",)
    assert clamped.fallback.on_status == (503,)


def test_clamp_policy_is_idempotent() -> None:
    once, _ = clamp_policy(Policy(retry=RetryPolicy(max_retries=50, base_ms=1, max_ms=0)), Ceilings())
    assert clamp_policy(once, Ceilings()) == (once, ())


@pytest.mark.parametrize(
    ("asked", "applied"), [(0, 1), (-2, 1), (3, 3), (25, 10)], ids=["zero", "negative", "in-range", "over-ceiling"]
)
def test_policy_plan_max_offers_is_clamped_to_1_and_the_ceiling(asked: int, applied: int) -> None:
    from turnout.core.policy import Ceilings

    policy, clamps = clamp_policy(built({"plan": {"max_offers": asked}}), Ceilings(max_offers=10))
    assert policy.plan.max_offers == applied
    assert [c.path for c in clamps] == ([] if asked == applied else ["plan.max_offers"])


def test_policy_plan_section_merges_like_the_others() -> None:
    merged = merge_policy(Policy(), {"plan": {"max_offers": 5}, "budget": {"max_attempts": 4}})
    assert merged.plan.max_offers == 5 and merged.budget.max_attempts == 4
    with pytest.raises(msgspec.ValidationError, match=r"\$\.plan"):
        merge_policy(Policy(), {"plan": {"max_offer": 5}})


def test_each_overrides_section_has_exactly_its_policy_sections_fields_and_types() -> None:
    assert PolicyOverrides.__struct_fields__ == Policy.__struct_fields__ == tuple(SECTION_OVERRIDES)
    for name, overrides in SECTION_OVERRIDES.items():
        section = type(getattr(Policy(), name))
        assert overrides.__struct_fields__ == section.__struct_fields__
        full, partial = typing.get_type_hints(section), typing.get_type_hints(overrides)
        for field in section.__struct_fields__:
            assert partial[field] == full[field] | UnsetType, (name, field)


def test_with_override_sets_one_field_of_a_partial_policy_and_keeps_the_others() -> None:
    partial = msgspec.convert({"retry": {"base_ms": 500}, "budget": None}, PolicyOverrides)
    changed = with_override(with_override(partial, "retry.max_retries", 2), "budget.max_attempts", 3)
    assert msgspec.to_builtins(changed) == {"retry": {"base_ms": 500, "max_retries": 2}, "budget": {"max_attempts": 3}}
    assert merge_policy(Policy(), changed) == merge_policy(Policy(), msgspec.to_builtins(changed))
