"""Operator ceilings: an org admin tightens the operator's limits and budgets, never lifts, removes or escapes them."""

from __future__ import annotations

import msgspec
import pytest

from turnout.core.limits import Limits
from turnout.core.scopes import ScopeSettings
from turnout.core.spend import Budget
from turnout.stored.orgs import Ceiling, OrgDoc, doc_decoder, doc_encoder
from turnout.tenancy.admin import AdminError, KeyCreate, SquadCreate, add_key, add_squad
from turnout.tenancy.ceilings import check_move, check_within, forget, operator_wrote

TOKEN = "tk-abcdefgh-secret-part-000000000000"
HARD = Budget(usd=1.0, period="day", hard=True)


def org() -> OrgDoc:
    """acme: an operator ceiling of rpm 3 and $1/day hard at the org, rpm 5 on squad `capped`."""
    doc = add_squad(OrgDoc(id="acme"), SquadCreate(name="capped"), 1.0)
    doc = add_squad(doc, SquadCreate(name="free"), 1.0)
    doc, _ = add_key(doc, KeyCreate(name="ci", squad="capped"), TOKEN, 1.0)
    top = ScopeSettings(limits=Limits(rpm=3), budget=HARD)
    doc = operator_wrote(doc, ("org", None), top, ("limits", "budget"))
    return operator_wrote(doc, ("squad", "capped"), ScopeSettings(limits=Limits(rpm=5)), ("limits",))


def refused(fn: object, *args: object, **kwargs: object) -> AdminError:
    with pytest.raises(AdminError) as caught:
        fn(*args, **kwargs)  # type: ignore[operator]
    assert caught.value.status_code == 403 and caught.value.code == "operator_ceiling"
    return caught.value


def test_the_operators_limits_and_budget_are_stored_as_ceilings_and_survive_a_round_trip() -> None:
    doc = org()
    assert doc.ceilings == {
        "org": Ceiling(limits=Limits(rpm=3), budget=HARD),
        "squads.capped": Ceiling(limits=Limits(rpm=5)),
    }
    assert doc_decoder.decode(doc_encoder.encode(doc)) == doc
    assert b"ceilings" not in doc_encoder.encode(OrgDoc(id="x"))  # an old process still reads a doc without any


@pytest.mark.parametrize(
    ("settings", "param"),
    [
        (ScopeSettings(budget=HARD), "settings.limits.rpm"),  # removes the limit
        (ScopeSettings(limits=Limits(rpm=1_000_000_000), budget=HARD), "settings.limits.rpm"),  # lifts it
        (ScopeSettings(limits=Limits(rpm=3)), "settings.budget"),  # removes the budget
        (ScopeSettings(limits=Limits(rpm=3), budget=Budget(usd=2.0, period="day", hard=True)), "settings.budget"),
        (ScopeSettings(limits=Limits(rpm=3), budget=Budget(usd=1.0, period="day")), "settings.budget"),  # soft
        (ScopeSettings(limits=Limits(rpm=3), budget=Budget(usd=1.0, period="month", hard=True)), "settings.budget"),
    ],
    ids=["remove-limit", "lift-limit", "remove-budget", "raise-budget", "soften-budget", "longer-period"],
)
def test_an_org_admin_neither_lifts_nor_removes_the_org_ceiling(settings: ScopeSettings, param: str) -> None:
    error = refused(check_within, org(), ("org", None), settings)
    assert error.param == param and "the org" in error.message


def test_stricter_values_pass_at_every_scope() -> None:
    doc = org()
    check_within(
        doc, ("org", None), ScopeSettings(limits=Limits(rpm=2, tpm=10), budget=Budget(usd=0.5, period="day", hard=True))
    )
    check_within(doc, ("squad", "capped"), ScopeSettings(limits=Limits(rpm=1)))
    check_within(
        doc, ("key", "ci"), ScopeSettings(limits=Limits(rpm=2), budget=Budget(usd=0.1, period="day", hard=True))
    )
    check_within(doc, ("squad", "free"), ScopeSettings())  # below a ceiling, leaving a field unset is no escape


def test_a_key_or_squad_is_not_set_above_a_ceiling_that_binds_it() -> None:
    doc = org()
    assert (
        refused(check_within, doc, ("key", "ci"), ScopeSettings(limits=Limits(rpm=10**9))).param
        == "settings.limits.rpm"
    )
    assert "squad capped" in refused(check_within, doc, ("squad", "capped"), ScopeSettings()).message
    refused(check_within, doc, ("squad", "new"), ScopeSettings(limits=Limits(rpm=4)))  # a new squad under the org
    refused(check_within, doc, ("key", "new"), ScopeSettings(limits=Limits(rpm=4)), squad="capped")


def test_a_key_bound_by_its_squads_ceiling_is_not_moved_out() -> None:
    doc = org()
    assert refused(check_move, doc, "ci", "free").param == "squad"
    refused(check_move, doc, "ci", None)
    check_move(doc, "ci", "capped")


def test_the_operator_lifts_a_ceiling_by_naming_it_and_keeps_those_it_does_not_name() -> None:
    doc = operator_wrote(org(), ("org", None), ScopeSettings(), ("limits",))
    assert doc.ceilings["org"] == Ceiling(budget=HARD)
    assert forget(doc, "squads.capped").ceilings == {"org": Ceiling(budget=HARD)}
    check_within(msgspec.structs.replace(doc), ("org", None), ScopeSettings(budget=HARD))
