"""Operator ceilings against a real fleet (#40 item 2): an org admin's every attempt to lift, remove or
escape the operator's limit or budget is refused, and the org's traffic stays under the ceiling."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from support.gateway import Gateway
from support.tenancy import OPERATOR, Admin, chat, tenancy_fleet, wait_for

pytestmark = pytest.mark.integration

RPM = 3
BUDGET = {"usd": 1, "period": "day", "hard": True}


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with tenancy_fleet() as gateway:
        yield gateway


def refused(response: httpx.Response, param: str) -> None:
    """A 403 `operator_ceiling` naming `param` and the ceiling."""
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "operator_ceiling" and error["param"] == param
    assert error["type"] == "permission_error" and "operator's ceiling at" in error["message"]


def test_an_org_admin_cannot_lift_remove_or_escape_the_operators_ceiling(gw: Gateway) -> None:
    operator = Admin(gw.base_url, OPERATOR)
    made = operator.call("POST", "/orgs", {"id": "capped", "settings": {"limits": {"rpm": RPM}, "budget": BUDGET}})
    assert made.status_code == 201, made.text
    assert (
        operator.call("POST", "/orgs/capped/squads", {"name": "slow", "settings": {"limits": {"rpm": 5}}}).status_code
        == 201
    )
    boss = operator.call("POST", "/orgs/capped/keys", {"name": "boss", "admin": True}).json()["secret"]
    moved = operator.call("POST", "/orgs/capped/keys", {"name": "mover", "squad": "slow"}).json()["secret"]
    admin = Admin(gw.base_url, boss)

    # lift and remove, at the org scope
    refused(admin.call("PATCH", "/orgs/capped/settings", {"limits": None, "budget": None}), "settings.limits.rpm")
    refused(admin.call("PATCH", "/orgs/capped/settings", {"budget": None}), "settings.budget")
    refused(admin.call("PUT", "/orgs/capped/settings", {}), "settings.limits.rpm")
    refused(admin.call("PATCH", "/orgs/capped/settings", {"limits": {"rpm": 10**9}}), "settings.limits.rpm")
    refused(admin.call("PATCH", "/orgs/capped/settings", {"budget": {**BUDGET, "usd": 100}}), "settings.budget")
    refused(admin.call("PATCH", "/orgs/capped/settings", {"budget": {**BUDGET, "hard": False}}), "settings.budget")
    # escape: a key above it, a new squad above it, a key out of its operator-capped squad
    refused(admin.call("PATCH", "/orgs/capped/keys/mover/settings", {"limits": {"rpm": 10**9}}), "settings.limits.rpm")
    refused(admin.call("PATCH", "/orgs/capped/squads/slow/settings", {"limits": None}), "settings.limits.rpm")
    refused(
        admin.call("POST", "/orgs/capped/squads", {"name": "fast", "settings": {"limits": {"rpm": 100}}}),
        "settings.limits.rpm",
    )
    refused(
        admin.call("POST", "/orgs/capped/keys", {"name": "big", "settings": {"limits": {"rpm": 100}}}),
        "settings.limits.rpm",
    )
    assert admin.call("POST", "/orgs/capped/squads", {"name": "free"}).status_code == 201
    refused(admin.call("PATCH", "/orgs/capped/keys/mover", {"squad": "free"}), "squad")
    # stricter is fine; the ceiling stays in force
    assert admin.call("PATCH", "/orgs/capped/keys/mover/settings", {"limits": {"rpm": 2}}).status_code == 200
    settings = operator.call("GET", "/orgs/capped/settings").json()["settings"]
    assert settings["limits"] == {"rpm": RPM} and settings["budget"] == BUDGET

    # new keys (and a new squad) share the org's one counter: 40 requests from 4 new keys, at most RPM served
    secrets = [
        admin.call("POST", "/orgs/capped/keys", {"name": f"new{i}", "squad": "free" if i % 2 else None}).json()[
            "secret"
        ]
        for i in range(4)
    ]
    wait_for(lambda: chat(gw.base_url, moved, "t-ok").status_code in (200, 429), 5, "the org's keys are known")
    answers = [chat(gw.base_url, secret, "t-ok").status_code for secret in secrets for _ in range(10)]
    assert answers.count(200) <= RPM - 1, answers  # the first request above already took one
    assert answers.count(429) >= 40 - RPM
