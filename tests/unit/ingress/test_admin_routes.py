"""The export route: its time bounds (ISO-8601 or epoch seconds, else a 400 naming the parameter),
and whose records a caller exports (an org admin its own org, the operator the org it names)."""

from __future__ import annotations

import pytest

from turnout.errors import RequestRejected
from turnout.tenancy.admin import not_found
from turnout_ingress.admin.access import Caller, rejected
from turnout_ingress.admin.records import export_org, parse_time


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("1700000000", 1_700_000_000.0),
        ("1700000000.5", 1_700_000_000.5),
        ("2023-11-14T22:13:20Z", 1_700_000_000.0),
        ("2023-11-14T22:13:20", 1_700_000_000.0),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000.0),
        ("2023-11-14", 1_699_920_000.0),
    ],
    ids=["absent", "empty", "epoch", "epoch-fraction", "iso-z", "iso-naive-utc", "iso-offset", "date"],
)
def test_parse_time_accepts_iso_and_epoch(value: str | None, expected: float | None) -> None:
    assert parse_time(value, "since") == expected


def test_parse_time_rejects_garbage_naming_the_parameter() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_time("yesterday", "until")
    assert info.value.status_code == 400 and info.value.param == "until"
    assert info.value.code == "invalid_request"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "99999999999999999999", "-1e20", "-1", "9999-01-01"])
def test_parse_time_rejects_moments_no_calendar_holds(value: str) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_time(value, "at")
    assert (info.value.status_code, info.value.param, info.value.code) == (400, "at", "invalid_request")


def test_an_org_admin_exports_its_own_org_named_or_not() -> None:
    admin = Caller(org="acme")
    assert export_org(admin, None) == export_org(admin, "") == export_org(admin, "acme") == "acme"


def test_an_org_admin_naming_another_org_gets_the_404_of_a_missing_org() -> None:
    with pytest.raises(RequestRejected) as info:
        export_org(Caller(org="acme"), "beta")
    missing = rejected(not_found())
    assert (info.value.status_code, info.value.message, info.value.code, info.value.param) == (
        missing.status_code,
        missing.message,
        missing.code,
        missing.param,
    )


def test_the_operator_exports_the_org_it_names_and_must_name_one() -> None:
    operator = Caller(org=None)
    assert export_org(operator, "demo") == "demo"
    for asked in (None, ""):
        with pytest.raises(RequestRejected) as info:
            export_org(operator, asked)
        assert (info.value.status_code, info.value.param, info.value.code) == (400, "org", "invalid_request")
        assert "`org` is required with the operator key" in info.value.message
