"""The clock-skew estimate (`turnout.core.clock`): midpoint of the round trip, warning beyond 1 s."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.core.clock import SKEW_WARN_S, skew_alarming, skew_s

EPOCH_S = 1_800_000_000.0


def test_a_clock_30_s_ahead_with_an_instant_round_trip_is_30_s_ahead() -> None:
    assert skew_s(EPOCH_S + 30, EPOCH_S, EPOCH_S + 30) == pytest.approx(30.0)


def test_the_round_trip_is_split_in_half() -> None:
    # sent at 100.0, received at 100.4: the server read its clock at ~100.2 local time
    assert skew_s(100.0, 100.2, 100.4) == pytest.approx(0.0)
    assert skew_s(100.0, 95.2, 100.4) == pytest.approx(5.0)
    assert skew_s(100.0, 130.2, 100.4) == pytest.approx(-30.0)


@given(
    true_skew=st.floats(-3600, 3600),
    to_server=st.floats(0, 2),
    back=st.floats(0, 2),
)
def test_the_error_is_at_most_half_the_round_trip(true_skew: float, to_server: float, back: float) -> None:
    sent = EPOCH_S
    server = sent + to_server - true_skew  # the server's clock = local - true skew
    received = sent + to_server + back
    assert abs(skew_s(sent, server, received) - true_skew) <= (to_server + back) / 2 + 1e-6


@pytest.mark.parametrize(
    ("skew", "alarming"),
    [
        (0.0, False),
        (0.999, False),
        (SKEW_WARN_S, False),
        (1.001, True),
        (-1.001, True),
        (-0.5, False),
        (30.0, True),
    ],
)
def test_only_a_skew_beyond_one_second_is_alarming(skew: float, alarming: bool) -> None:
    assert skew_alarming(skew) is alarming
