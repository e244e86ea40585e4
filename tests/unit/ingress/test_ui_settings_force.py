"""What the key's settings form shows in force under each field (#45 item 8): the value its requests
get and the scope it comes from, so a key's own setting a higher scope overrides is seen not to apply."""

from __future__ import annotations

from typing import Any

import msgspec

from turnout.core.policy import Ceilings, Policy
from turnout.core.scopes import ScopeSettings
from turnout_ingress.ui.settings_force import in_force


def settings(**values: Any) -> ScopeSettings:
    return msgspec.convert(values, ScopeSettings)


def test_each_field_shows_its_value_in_force_and_the_scope_it_comes_from() -> None:
    org = settings(fallbacks={"chat": ["small"]})
    squad = ("research", settings(key_mode="own_only"))
    key = settings(fallbacks=["big"], policy={"retry": {"max_retries": 9}}, reroutes=["fast"])
    force = in_force(org, squad, key, Policy(), Ceilings())
    assert force["fallbacks"] == ("chat: small", "org")  # the org's wins over the key's own
    assert force["key_mode"] == ("own_only", "squad research")
    assert force["reroutes"] == ("fast", "key")
    assert force["policy.retry.max_retries"] == ("6", "key")  # clamped to ceilings.max_retries
    assert force["policy.retry.base_ms"] == ("250", "gateway")
    assert force["policy.fallback.on_status"] == ("408, 429, 5xx", "gateway")
    assert force["budget.usd"] == ("", "gateway")
    assert not any(name.startswith("limits.") for name in force)


def test_a_policy_set_by_the_org_replaces_the_keys_whole() -> None:
    org = settings(policy={"budget": {"max_attempts": 2}})
    key = settings(policy={"retry": {"max_retries": 3}})
    force = in_force(org, None, key, Policy(), Ceilings())
    assert force["policy.budget.max_attempts"] == ("2", "org")
    assert force["policy.retry.max_retries"] == ("1", "gateway")  # the key's 3 is not in force
