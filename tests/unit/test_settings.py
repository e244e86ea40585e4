"""`Settings.from_env`: defaults, every variable read, and a named error for each malformed one."""

from __future__ import annotations

import pytest

from turnout.errors import ConfigError
from turnout.settings import DEFAULT_REDIS_URL, Settings, SettingsError
from turnout.vault import generate_key


def test_settings_defaults_from_an_empty_environment() -> None:
    settings = Settings.from_env({})
    assert settings == Settings(env={})
    assert (settings.config_path, settings.redis_url, settings.host, settings.port) == (
        "turnout.yaml",
        DEFAULT_REDIS_URL,
        "127.0.0.1",
        8080,
    )
    assert (settings.drain_s, settings.drain_whole_s, settings.metrics_port, settings.metrics_host) == (
        25.0,
        25,
        9464,
        "127.0.0.1",
    )
    assert settings.operator_key is None and settings.trace_url is None


def test_settings_read_every_variable() -> None:
    env = {
        "TURNOUT_CONFIG": "/etc/turnout.yaml",
        "TURNOUT_REDIS_URL": "redis://r:6379/1",
        "TURNOUT_HOST": "0.0.0.0",
        "TURNOUT_PORT": "9000",
        "TURNOUT_DRAIN_S": "2.5",
        "TURNOUT_METRICS_PORT": "9500",
        "TURNOUT_OPERATOR_KEY": "op-1",
        "TURNOUT_UI_TRACE_URL": "https://t/{trace_id}",
        "OTEL_X": "y",
    }
    settings = Settings.from_env(env)
    assert settings.config_path == "/etc/turnout.yaml" and settings.redis_url == "redis://r:6379/1"
    assert (settings.host, settings.port, settings.drain_s, settings.drain_whole_s) == ("0.0.0.0", 9000, 2.5, 3)
    assert (settings.metrics_port, settings.metrics_host) == (9500, "0.0.0.0"), "the metrics host follows TURNOUT_HOST"
    assert settings.operator_key == "op-1" and settings.trace_url == "https://t/{trace_id}"
    assert settings.env == env, "readers of a whole environment get the mapping it was read from"


@pytest.mark.parametrize("value", ["0", ""])
def test_settings_metrics_port_zero_or_empty_turns_it_off(value: str) -> None:
    assert Settings.from_env({"TURNOUT_METRICS_PORT": value}).metrics_port == 0


def test_settings_metrics_host_wins_over_host() -> None:
    env = {"TURNOUT_HOST": "0.0.0.0", "TURNOUT_METRICS_HOST": "127.0.0.2"}
    assert Settings.from_env(env).metrics_host == "127.0.0.2"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TURNOUT_DRAIN_S", "abc", "TURNOUT_DRAIN_S must be a number of seconds, got 'abc'"),
        ("TURNOUT_DRAIN_S", "-1", "TURNOUT_DRAIN_S must be a number of seconds, got '-1'"),
        ("TURNOUT_DRAIN_S", "nan", "TURNOUT_DRAIN_S must be a number of seconds, got 'nan'"),
        ("TURNOUT_PORT", "http", "TURNOUT_PORT must be a port number (1-65535), got 'http'"),
        ("TURNOUT_PORT", "70000", "TURNOUT_PORT must be a port number (1-65535), got '70000'"),
        ("TURNOUT_METRICS_PORT", "x", "TURNOUT_METRICS_PORT must be a port number (0 or empty: off), got 'x'"),
        ("TURNOUT_PYTHON_OPTIMIZE", "3", "TURNOUT_PYTHON_OPTIMIZE must be 0, 1 or 2, got '3'"),
        ("TURNOUT_PYTHON_OPTIMIZE", "-OO", "TURNOUT_PYTHON_OPTIMIZE must be 0, 1 or 2, got '-OO'"),
        ("TURNOUT_PYTHON_OPTIMIZE", "", "TURNOUT_PYTHON_OPTIMIZE must be 0, 1 or 2, got ''"),
    ],
)
def test_settings_malformed_variable_is_named_with_its_value(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: value})
    assert str(info.value) == message
    assert info.value.errors == [message]
    assert isinstance(info.value, ConfigError), "the CLI answers it as a configuration error (exit 2)"


def test_settings_every_malformed_variable_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"TURNOUT_DRAIN_S": "soon", "TURNOUT_PORT": "eighty"})
    assert info.value.errors == [
        "TURNOUT_PORT must be a port number (1-65535), got 'eighty'",
        "TURNOUT_DRAIN_S must be a number of seconds, got 'soon'",
    ]


def test_settings_redis_call_timeout_and_allow_no_aof_defaults_and_values() -> None:
    defaults = Settings.from_env({})
    assert (defaults.redis_call_timeout_s, defaults.allow_no_aof) == (0.4, False)
    settings = Settings.from_env({"TURNOUT_REDIS_CALL_TIMEOUT_MS": "2500", "TURNOUT_ALLOW_NO_AOF": "1"})
    assert settings.redis_call_timeout_s == pytest.approx(2.5) and settings.allow_no_aof is True
    assert Settings.from_env({"TURNOUT_ALLOW_NO_AOF": "no"}).allow_no_aof is False


def test_settings_malformed_redis_call_timeout_is_named_with_the_bounds_message() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"TURNOUT_REDIS_CALL_TIMEOUT_MS": "abc", "TURNOUT_PORT": "eighty"})
    assert info.value.errors == [
        "TURNOUT_REDIS_CALL_TIMEOUT_MS must be a number of milliseconds in (0, 60000], got 'abc'",
        "TURNOUT_PORT must be a port number (1-65535), got 'eighty'",
    ]


def test_settings_python_optimize_defaults_to_two_and_reads_each_level() -> None:
    assert Settings.from_env({}).python_optimize == 2, "server processes run under -OO unless told otherwise"
    for level in (0, 1, 2):
        assert Settings.from_env({"TURNOUT_PYTHON_OPTIMIZE": f" {level} "}).python_optimize == level


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TURNOUT_SECRET_KEY": "garbage-not-a-key"}, "TURNOUT_SECRET_KEY: key #1 is not a Fernet key"),
        ({"TURNOUT_SECRET_KEY": f"{generate_key()},short"}, "TURNOUT_SECRET_KEY: key #2 is not a Fernet key"),
        (
            {"TURNOUT_SSRF_ALLOW": "not a host!!"},
            "TURNOUT_SSRF_ALLOW: 'not a host!!' is neither a CIDR nor a host name",
        ),
    ],
    ids=["secret-key", "second-secret-key", "ssrf-allow"],
)
def test_settings_a_malformed_secret_key_or_allow_list_stops_the_start_naming_it(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    assert message in str(info.value)
    assert "garbage-not-a-key" not in str(info.value)  # a key's value is never echoed


def test_settings_well_formed_secret_keys_and_allow_list_pass() -> None:
    env = {"TURNOUT_SECRET_KEY": f"{generate_key()},{generate_key()}", "TURNOUT_SSRF_ALLOW": "127.0.0.1,10.0.0.0/8"}
    assert Settings.from_env(env).env == env
