"""Table tests and properties for turnout.core.spend (SPEC §10 "Spend ledger": UTC days and months)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.spend import PERIODS, Period, period_bounds, period_id, scope_fields


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("period", "moment", "pid", "start", "end"),
    [
        ("day", "2026-12-01T13:05:00", "2026-12-01", "2026-12-01T00:00:00", "2026-12-02T00:00:00"),
        ("day", "2026-12-31T23:59:59.999", "2026-12-31", "2026-12-31T00:00:00", "2027-01-01T00:00:00"),
        ("month", "2026-12-15T08:00:00", "2026-12", "2026-12-01T00:00:00", "2027-01-01T00:00:00"),
        ("month", "2028-02-29T12:00:00", "2028-02", "2028-02-01T00:00:00", "2028-03-01T00:00:00"),
        ("month", "2026-03-01T00:00:00", "2026-03", "2026-03-01T00:00:00", "2026-04-01T00:00:00"),
    ],
    ids=["day", "last-second-of-the-year", "december-rolls-the-year", "leap-february", "first-instant"],
)
def test_periods_are_utc_calendar_days_and_months(period: Period, moment: str, pid: str, start: str, end: str) -> None:
    assert period_id(period, at(moment)) == pid
    assert period_bounds(period, at(moment)) == (at(start), at(end))


def test_an_instant_a_hair_before_midnight_is_still_in_its_day() -> None:
    assert period_id("day", 2_051_222_399.9999995) == "2034-12-31"
    assert period_bounds("day", 2_051_222_399.9999995)[1] == 2_051_222_400.0


@given(st.floats(0, 4_102_444_800), st.sampled_from(PERIODS))
def test_property_an_instant_lies_in_its_period_and_the_period_id_is_constant_within_it(
    now_s: float, period: Period
) -> None:
    start, end = period_bounds(period, now_s)
    assert start <= now_s < end
    assert period_id(period, start) == period_id(period, now_s) == period_id(period, end - 0.001)
    assert period_id(period, end) != period_id(period, now_s)


def test_scope_fields_name_the_org_the_squad_and_the_key() -> None:
    assert scope_fields("research", "ci-bot") == ("org", "squad:research", "key:ci-bot")
    assert scope_fields(None, "ci-bot") == ("org", "key:ci-bot")
