"""On/off environment variables: one reading, and a value that is neither refused naming the variable."""

from __future__ import annotations

import pytest

from turnout.settings import Settings, SettingsError
from turnout.state.switches import switch_on


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " yes ", "on", "On"])
def test_on_values(value: str) -> None:
    assert switch_on({"X": value}, "X") is True


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "", " ", "OFF"])
def test_off_values_and_unset(value: str) -> None:
    assert switch_on({"X": value}, "X") is False
    assert switch_on({}, "X") is False


@pytest.mark.parametrize("value", ["maybe", "ture", "2", "yes please"])
def test_anything_else_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ValueError) as caught:
        switch_on({"X": value}, "X")
    assert str(caught.value) == f"X must be 1, true, yes or on (or 0, false, no, off), got {value!r}"


@pytest.mark.parametrize("name", ["TURNOUT_ALLOW_NO_AOF", "TURNOUT_CATALOG_FROM_FILE"])
def test_settings_refuse_a_malformed_switch_at_start(name: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: "ture"})
    assert f"{name} must be 1, true, yes or on" in str(caught.value)
    assert Settings.from_env({"TURNOUT_ALLOW_NO_AOF": "on"}).allow_no_aof is True
