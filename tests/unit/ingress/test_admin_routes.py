"""The export route: its time bounds (ISO-8601 or epoch seconds, `since` <= `until`, else a 400
`invalid_value` naming the parameter),
and whose records a caller exports (an org admin its own org, the operator the org it names)."""

from __future__ import annotations

import pytest

from turnout.errors import RequestRejected
from turnout.tenancy.admin import not_found
from turnout_ingress.admin.access import Caller, rejected
from turnout_ingress.admin.quote import quoted
from turnout_ingress.admin.records import export_org
from turnout_ingress.admin.time_query import parse_range, parse_time
from turnout_ingress.ui.query import times


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
    assert info.value.code == "invalid_value"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "99999999999999999999", "-1e20", "-1", "9999-01-01"])
def test_parse_time_rejects_moments_no_calendar_holds(value: str) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_time(value, "at")
    assert (info.value.status_code, info.value.param, info.value.code) == (400, "at", "invalid_value")
    assert info.value.message.endswith(f"not `{value}`."), "the refused value is quoted"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("soon", "`soon`"),
        ("a\nb", '"a\\nb"'),
        ("x" * 100, f"`{'x' * 40}`… (100 characters)"),
    ],
)
def test_parse_time_quotes_what_it_refuses_without_letting_it_break_the_message(value: str, shown: str) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_time(value, "since")
    assert info.value.message == f"`since` must be ISO-8601 (2025-06-01T12:00:00Z) or epoch seconds, not {shown}."


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, (None, None)),
        ({"since": "2020-01-01"}, (1_577_836_800.0, None)),
        ({"until": "2020-01-01"}, (None, 1_577_836_800.0)),
        ({"since": "2020-01-01", "until": "2020-01-01"}, (1_577_836_800.0, 1_577_836_800.0)),
        ({"since": "1577836800", "until": "2030-01-01T00:00:00Z"}, (1_577_836_800.0, 1_893_456_000.0)),
    ],
    ids=["open", "since-only", "until-only", "one-moment", "ordered"],
)
def test_parse_range_reads_both_bounds(query: dict[str, str], expected: tuple[float | None, float | None]) -> None:
    assert parse_range(query) == expected


def test_parse_range_refuses_since_later_than_until_naming_since() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_range({"since": "2030-01-01", "until": "2020-01-01"})
    assert (info.value.status_code, info.value.param, info.value.code) == (400, "since", "invalid_value")
    assert "`since` (`2030-01-01`) is later than `until` (`2020-01-01`)" in info.value.message


def test_parse_range_names_a_bad_bound_before_comparing() -> None:
    with pytest.raises(RequestRejected) as info:
        parse_range({"since": "2030-01-01", "until": "soon"})
    assert (info.value.param, info.value.code) == ("until", "invalid_value")


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
        assert (info.value.status_code, info.value.param, info.value.code) == (400, "org", "invalid_value")
        assert "`org` is required with the operator key" in info.value.message


def test_the_dashboard_shows_a_reversed_range_as_an_error() -> None:
    assert times({"since": "2020-01-01", "until": "2030-01-01"}) == (1_577_836_800.0, 1_893_456_000.0, None)
    since_s, until_s, error = times({"since": "2030-01-01", "until": "2020-01-01"})
    assert (since_s, until_s) == (None, None)
    assert error is not None and "is later than `until`" in error


def test_quoted_keeps_a_client_value_from_breaking_the_message() -> None:
    assert quoted("zzz", 64) == "`zzz`"
    assert quoted(None, 64) == "``"
    assert quoted("a\nb`c", 64) == '"a\\nb`c"'  # a JSON string: the newline escaped, the backtick inside quotes
    assert quoted("x" * 300, 64) == f"`{'x' * 64}`… (300 characters)"
    assert quoted("\x00" * 70, 64) == '"' + "\\u0000" * 64 + '"… (70 characters)'


def test_a_query_parameter_the_route_does_not_read_is_refused_naming_it() -> None:
    from turnout_ingress.admin.time_query import refuse_unknown

    refuse_unknown({"since": "1", "until": "2"}, ("since", "until"))
    with pytest.raises(RequestRejected) as info:
        refuse_unknown({"since": "1", "sinse": "2"}, ("since", "until"))
    assert (info.value.status_code, info.value.param, info.value.code) == (400, "sinse", "invalid_value")
    assert info.value.message == "Unknown query parameter `sinse`; this route reads `since`, `until`."
    with pytest.raises(RequestRejected) as info:
        refuse_unknown({"a\nb": "x"}, ("org",))
    assert info.value.message.startswith('Unknown query parameter "a\\nb";')


def test_a_query_parameter_given_twice_is_refused_naming_it_and_how_many_times() -> None:
    from starlette.datastructures import QueryParams

    from turnout_ingress.admin.time_query import refuse_unknown

    refuse_unknown(QueryParams("period=day&at=2026-12-01"), ("period", "at"))
    with pytest.raises(RequestRejected) as info:
        refuse_unknown(QueryParams("period=day&period=month&org=a&org=b&org=c"), ("org", "period"))
    assert (info.value.status_code, info.value.param, info.value.code) == (400, "org", "invalid_value")
    assert info.value.message == "`org` is given 3 times; send it once."
