"""The request path's Redis bound comes from `TURNOUT_REDIS_CALL_TIMEOUT_MS`, with named errors."""

from __future__ import annotations

import pytest

from turnout.state.bounds import CALL_TIMEOUT_ENV, call_timeout_s


@pytest.mark.parametrize(
    ("raw", "seconds"), [(None, 0.4), ("", 0.4), (" 2500 ", 2.5), ("0.5", 0.0005), ("60000", 60.0)]
)
def test_the_bound_is_read_in_milliseconds(raw: str | None, seconds: float) -> None:
    env = {} if raw is None else {CALL_TIMEOUT_ENV: raw}
    assert call_timeout_s(env) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "nan", "inf", "60001", "1e9"])
def test_a_bad_bound_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=f"{CALL_TIMEOUT_ENV} must be a number of milliseconds.*{raw!r}"):
        call_timeout_s({CALL_TIMEOUT_ENV: raw})
