"""The process settings read from the environment: one typed value, read once at start.

Owns: `Settings`, built by `Settings.from_env(environ)` from an injected
mapping (a process passes `os.environ`; tests pass a dict), with a named
error for every malformed variable (`TURNOUT_DRAIN_S must be a number of
seconds, got 'abc'`), all reported at once. Nothing else in the library or
the services reads `os.environ` for these variables. Readers that take a
whole environment (the vault's `TURNOUT_SECRET_KEY`, the SSRF allow-list
`TURNOUT_SSRF_ALLOW`, OpenTelemetry's `OTEL_*`, `${VAR}` in the
configuration file) get `Settings.env`, the mapping it was built from.
Must not import: services, FastAPI, httpx.

Variables (README "Configuration"):
    TURNOUT_CONFIG         configuration file (default `turnout.yaml`)
    TURNOUT_REDIS_URL      Redis URL (default `redis://127.0.0.1:6379/0`; its form is
                           checked by `turnout.state.redis_url.check_redis_url`)
    TURNOUT_HOST           listen address of the ingress (default 127.0.0.1)
    TURNOUT_PORT           listen port of the ingress (default 8080)
    TURNOUT_DRAIN_S        seconds a stopping worker waits for its jobs (default 25)
    TURNOUT_METRICS_PORT   a worker's Prometheus side port (default 9464; 0 or empty: off)
    TURNOUT_METRICS_HOST   its address (default TURNOUT_HOST, else 127.0.0.1)
    TURNOUT_OPERATOR_KEY   the operator's admin key (unset: no operator)
    TURNOUT_UI_TRACE_URL   the dashboard's link to a trace (`{trace_id}` filled in)
    TURNOUT_AUDIT_RETENTION_DAYS  days an authenticated audit entry is kept (default 90)
    TURNOUT_METRICS_TOKEN  when set, `/metrics` (ingress and worker side port) needs it as a bearer token
    TURNOUT_REDIS_CALL_TIMEOUT_MS  the request path's Redis bound (ms, default 400,
                           at most 60000; parsed by `turnout.state.bounds.call_timeout_s`,
                           whose module constant the request path reads)
    TURNOUT_ALLOW_NO_AOF   on (`1`, `true`, `yes`, `on`; `turnout.state.switches`): start on a Redis without AOF
                           (`turnout.state.persistence`)
    TURNOUT_ENQUEUE_WAIT_REPLICAS  replicas each enqueue waits for (Redis `WAIT`; default 0: no wait;
                           `turnout.state.jobs.replicated`)
    TURNOUT_ENQUEUE_WAIT_MS  the longest that wait lasts (ms, default 250, from 1 to 60000)
    TURNOUT_PYTHON_OPTIMIZE  Python optimization level of `turnout ingress` and
                           `turnout worker` (0, 1 or 2; default 2, Python's `-OO`:
                           no docstrings in memory; `turnout_cli.optimize`)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeVar

import msgspec

from turnout.errors import ConfigError
from turnout.state.bounds import call_timeout_s
from turnout.state.persistence import ALLOW_ENV
from turnout.state.redis_url import check_redis_url
from turnout.state.switches import CATALOG_FROM_FILE, switch_on

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
OPERATOR_KEY_ENV = "TURNOUT_OPERATOR_KEY"
T = TypeVar("T")


class SettingsError(ConfigError):
    """One or more environment variables are malformed; `errors` names each (`NAME must be ..., got '...'`)."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """What a Turnout process reads from its environment (module doc lists the variables).

    Attributes:
        config_path: the configuration file.
        redis_url: the fleet's Redis.
        host: the ingress's listen address.
        port: the ingress's listen port.
        drain_s: seconds a stopping worker waits for its running jobs (>= 0).
        metrics_port: a worker's Prometheus side port; 0 = disabled.
        metrics_host: the side port's address.
        operator_key: the operator key, or None.
        trace_url: the dashboard's trace link template, or None.
        redis_call_timeout_s: the request path's Redis bound (seconds; the variable is in ms).
        allow_no_aof: start on a Redis without AOF persistence.
        python_optimize: the Python optimization level a server process runs at (0, 1 or 2).
        audit_retention_days: days an authenticated audit entry is kept (> 0; never evicted by count).
        metrics_token: the bearer token `/metrics` requires, or None (open).
        enqueue_wait_replicas: replicas each enqueue waits for (`WAIT`); 0: none.
        enqueue_wait_ms: the longest that wait lasts (ms).
        env: the mapping the settings were read from (for readers of a whole environment).
    """

    config_path: str = "turnout.yaml"
    redis_url: str = DEFAULT_REDIS_URL
    host: str = "127.0.0.1"
    port: int = 8080
    drain_s: float = 25.0
    metrics_port: int = 9464
    metrics_host: str = "127.0.0.1"
    operator_key: str | None = None
    trace_url: str | None = None
    redis_call_timeout_s: float = 0.4
    allow_no_aof: bool = False
    python_optimize: int = 2
    audit_retention_days: float = 90.0
    metrics_token: str | None = None
    enqueue_wait_replicas: int = 0
    enqueue_wait_ms: int = 250
    env: dict[str, str] = {}

    @property
    def drain_whole_s(self) -> int:
        """`drain_s` rounded up to whole seconds (arq's `job_completion_wait`)."""
        return math.ceil(self.drain_s)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read the settings from `env` (a process passes `os.environ`).

        Raises:
            SettingsError: a variable is malformed; every such variable is named,
                with the expected form and the value found.
        """
        errors: list[str] = []

        def read(name: str, parse: Callable[[str], T], expected: str, default: T) -> T:
            raw = env.get(name)
            if raw is None:
                return default
            try:
                return parse(raw.strip())
            except ValueError:
                errors.append(f"{name} must be {expected}, got {raw!r}")
                return default

        def read_switch(name: str) -> bool:
            try:
                return switch_on(env, name)
            except ValueError as exc:  # names the variable and the values it takes
                errors.append(str(exc))
                return False

        read_switch(CATALOG_FROM_FILE)  # read where used (`turnout.catalog.watch`); checked here to fail at start
        host = env.get("TURNOUT_HOST") or "127.0.0.1"
        try:
            redis_call_timeout_s = call_timeout_s(env)
        except ValueError as exc:  # names the variable, the expected form and the value
            errors.append(str(exc))
            redis_call_timeout_s = call_timeout_s({})
        redis_url = env.get("TURNOUT_REDIS_URL") or DEFAULT_REDIS_URL
        try:
            check_redis_url(redis_url, name="TURNOUT_REDIS_URL")
        except ValueError as exc:  # names the variable and what is wrong, the password masked
            errors.append(str(exc))
        settings = cls(
            config_path=env.get("TURNOUT_CONFIG") or "turnout.yaml",
            redis_url=redis_url,
            host=host,
            port=read("TURNOUT_PORT", _port, "a port number (1-65535)", 8080),
            drain_s=read("TURNOUT_DRAIN_S", _seconds, "a number of seconds", 25.0),
            metrics_port=read("TURNOUT_METRICS_PORT", _port_or_off, "a port number (0 or empty: off)", 9464),
            metrics_host=env.get("TURNOUT_METRICS_HOST") or host,
            operator_key=env.get(OPERATOR_KEY_ENV) or None,
            trace_url=env.get("TURNOUT_UI_TRACE_URL") or None,
            redis_call_timeout_s=redis_call_timeout_s,
            allow_no_aof=read_switch(ALLOW_ENV),
            python_optimize=read("TURNOUT_PYTHON_OPTIMIZE", _optimize_level, "0, 1 or 2", 2),
            metrics_token=env.get("TURNOUT_METRICS_TOKEN") or None,
            audit_retention_days=read("TURNOUT_AUDIT_RETENTION_DAYS", _days, "a positive number of days", 90.0),
            enqueue_wait_replicas=read("TURNOUT_ENQUEUE_WAIT_REPLICAS", _replicas, "a whole number from 0 to 16", 0),
            enqueue_wait_ms=read("TURNOUT_ENQUEUE_WAIT_MS", _wait_ms, "a whole number of ms from 1 to 60000", 250),
            env=dict(env),
        )
        for check in (_secret_keys, _ssrf_allow):  # read again where used; checked here to fail at start
            try:
                check(env)
            except ValueError as exc:  # names the variable (and an entry), never a key's value
                errors.append(str(exc))
        if errors:
            raise SettingsError("; ".join(errors), errors)
        return settings


def _secret_keys(env: Mapping[str, str]) -> None:
    """`TURNOUT_SECRET_KEY` parses (each key 32 URL-safe base64 bytes). Raises ValueError naming it."""
    from turnout.vault import Vault

    Vault.from_env(env)


def _ssrf_allow(env: Mapping[str, str]) -> None:
    """`TURNOUT_SSRF_ALLOW` parses (each entry a host or network). Raises ValueError naming the entry."""
    from turnout.rules.ssrf import AllowList

    AllowList.from_env(env)


def _seconds(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(raw)
    return value


def _days(raw: str) -> float:
    value = _seconds(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _whole(raw: str, low: int, high: int) -> int:
    """`raw` as a whole number from `low` to `high`; ValueError otherwise."""
    value = int(raw)
    if not low <= value <= high:
        raise ValueError(raw)
    return value


def _port(raw: str) -> int:
    return _whole(raw, 1, 65535)


def _replicas(raw: str) -> int:
    return _whole(raw, 0, 16)


def _wait_ms(raw: str) -> int:
    return _whole(raw, 1, 60_000)


def _optimize_level(raw: str) -> int:
    if raw not in ("0", "1", "2"):
        raise ValueError(raw)
    return int(raw)


def _port_or_off(raw: str) -> int:
    return 0 if raw == "" else (0 if int(raw) == 0 else _port(raw))
