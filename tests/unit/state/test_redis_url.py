"""The fleet's Redis URL: every malformed form refused with its fault named, no password shown, and
every accepted one built into a client by the one factory every process uses (`turnout.state.clients`)."""

from __future__ import annotations

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from turnout.settings import Settings, SettingsError
from turnout.state.clients import async_client, blocking_client
from turnout.state.redis_url import check_redis_url, location, redacted, redis_url_fault
from turnout_cli.main import build_parser

ACCEPTED_URLS = [
    "redis://127.0.0.1:6379/0",
    "redis://redis.internal",
    "redis://h:6379/",
    "redis://h:6379/12",
    "redis://:s3cret@h:6380/2",
    "rediss://user:s3cret@h:6380/1?ssl_cert_reqs=none",
    "redis://[::1]:6379/0",
    "redis://h/0?socket_timeout=2&health_check_interval=10",
    "unix:///run/redis/redis.sock",
    "unix:///run/redis/redis.sock?db=3",
]


def _options(url: str) -> dict[str, object]:
    """What redis-py (the ingress's client) reads from `url`."""
    pool: redis.ConnectionPool = redis.ConnectionPool.from_url(url)  # type: ignore[no-untyped-call]
    return dict(pool.connection_kwargs)


@pytest.mark.parametrize("url", ACCEPTED_URLS)
def test_accepted_urls_build_the_fleets_clients_alike(url: str) -> None:
    assert redis_url_fault(url) is None and check_redis_url(url, name="X") == url
    options = _options(url)
    client = async_client(url)  # the ingress's and the worker's (`redis_class=ArqRedis`)
    assert client.connection_pool.connection_kwargs == options
    with blocking_client(url) as blocking:  # the start-up checks'
        assert blocking.connection_pool.connection_kwargs == options


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("", "it has no scheme"),
        ("garbage", "it has no scheme"),
        ("http://h:6379", "its scheme `http` is not redis, rediss, unix or redis+sentinel"),
        ("redis://h:99999/0", "its port is not a number from 1 to 65535"),
        ("redis://h:0/0", "its port is not a number from 1 to 65535"),
        ("redis://h:/0", "its port is not a number from 1 to 65535"),
        ("redis://:s3cret@h:port/0", "its port is not a number from 1 to 65535"),
        ("redis://", "it names no host"),
        ("redis://:s3cret@/0", "it names no host"),
        ("redis://h:6379/abc", "its database `abc` is not a whole number"),
        ("redis://h:6379/0/1", "its database `0/1` is not a whole number"),
        ("redis://h:6379/-1", "its database `-1` is not a whole number"),
        ("redis://h/0?db=x", "its db option `x` is not a whole number"),
        ("unix://", "it names no socket path"),
        ("unix:///", "it names no socket path"),
        ("redis://h/0?foo=1", "its option `foo` is not one the Redis client knows"),
        ("redis://h/0?socket_timeout=soon", "the Redis client refused it: Invalid value for 'socket_timeout'"),
        ("redis://[::1", "it does not parse as a URL (Invalid IPv6 URL)"),
        ("redis+sentinel://h", "it names no service"),
        ("redis+sentinel://h/", "it names no service"),
        ("redis+sentinel://:s3cret@h:26379", "it names no service"),
        ("redis+sentinel:///svc", "it names no sentinel host"),
        ("redis+sentinel://h1,,h2/svc", "it names no sentinel host"),
        ("redis+sentinel://h:99999/svc", "its sentinel `h:99999` has no port from 1 to 65535"),
        ("redis+sentinel://:s3cret@h:0/svc", "its sentinel `h:0` has no port from 1 to 65535"),
        ("redis+sentinel://h:x/svc", "its sentinel `h:x` has no port from 1 to 65535"),
        ("redis+sentinel://h:/svc", "its sentinel `h:` has no port from 1 to 65535"),
        ("redis+sentinel://:26379/svc", "its sentinel `:26379` names no host"),
        ("redis+sentinel://::1/svc", "its sentinel `::1` names no host"),
        ("redis+sentinel://h:1:2/svc", "its sentinel `h:1:2` is not a host[:port]"),
        ("redis+sentinel://[::1/svc", "its sentinel `[::1` is not a host[:port]"),
        ("redis+sentinel://h/svc/abc", "its database `abc` is not a whole number"),
        ("redis+sentinel://h/svc/1/2", "its path has more than a service and a database"),
        ("redis+sentinel://h/svc?db=x", "its database `x` is not a whole number"),
        ("redis+sentinel://h/svc/1?db=1", "it gives the database twice"),
        ("redis+sentinel://h/svc?socket_timeout=1", "its option `socket_timeout` is not one of sentinel_password"),
        ("redis+sentinel://h/svc?db=1&db=2", "its option `db` is given twice"),
        ("redis+sentinel://h/svc?ssl=maybe", "its option `ssl` is `maybe`, not true or false"),
        ("redis+sentinel://h/svc#x", "it has a fragment"),
    ],
)
def test_malformed_urls_are_refused_naming_the_fault(url: str, fault: str) -> None:
    found = redis_url_fault(url)
    assert found is not None and found.startswith(fault), found
    with pytest.raises(ValueError) as caught:
        check_redis_url(url, name="TURNOUT_REDIS_URL")
    assert str(caught.value).startswith("TURNOUT_REDIS_URL must be a Redis URL (redis://")
    assert fault in str(caught.value) and "s3cret" not in str(caught.value)


def test_redacted_masks_user_password_and_credential_options_and_cuts_long_text() -> None:
    assert redacted("redis://user:s3cret@h:6379/0") == "redis://***@h:6379/0"
    assert redacted("redis://a@b@h/0") == "redis://***@h/0"
    assert redacted("redis://h/0?db=1&password=s3cret&Username=me") == "redis://h/0?db=1&password=***&Username=***"
    assert redacted("redis://h:6379/0") == "redis://h:6379/0"
    assert redacted("x" * 500) == "x" * 200 + "..."


@given(st.text(max_size=80))
def test_any_text_gets_a_verdict_never_an_exception(text: str) -> None:
    fault = redis_url_fault(text)
    assert fault is None or isinstance(fault, str)


_PASSWORD = st.from_regex(r"PW[0-9]{6}", fullmatch=True)
_PORT = st.one_of(st.none(), st.integers(-5, 70_000).map(str), st.sampled_from(["", "x", "6379x"]))
_PATH = st.sampled_from(["", "/", "/0", "/15", "/abc", "/0/1", "/ 1"])


@given(
    scheme=st.sampled_from(["redis", "rediss", "unix", "http", ""]),
    host=st.sampled_from(["", "h", "redis.internal", "[::1]", "[::1"]),
    port=_PORT,
    path=_PATH,
    password=_PASSWORD,
    db=st.sampled_from([None, "1", "x", ""]),
)
def test_accepted_means_the_client_reads_it_and_a_password_is_never_shown(
    scheme: str, host: str, port: str | None, path: str, password: str, db: str | None
) -> None:
    authority = f":{password}@{host}" + ("" if port is None else f":{port}")
    if scheme == "unix":
        url = f"unix://:{password}@/run/r.sock" + ("" if db is None else f"?db={db}")
    else:
        url = f"{scheme}://{authority}{path}" + ("" if db is None else f"?db={db}")
    try:
        check_redis_url(url, name="TURNOUT_REDIS_URL")
    except ValueError as exc:
        assert password not in str(exc), "a refusal never shows the password"
        return
    pool: redis.ConnectionPool = redis.ConnectionPool.from_url(url)  # type: ignore[no-untyped-call]
    pool.make_connection()  # builds without connecting
    assert _options(url).get("password") == password


def test_settings_refuse_a_malformed_turnout_redis_url_naming_it() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"TURNOUT_REDIS_URL": "redis://:s3cret@h:port/0"})
    assert "TURNOUT_REDIS_URL must be a Redis URL" in str(caught.value)
    assert "its port is not a number from 1 to 65535; got 'redis://***@h:port/0'" in str(caught.value)
    assert Settings.from_env({"TURNOUT_REDIS_URL": "unix:///run/r.sock"}).redis_url == "unix:///run/r.sock"


@pytest.mark.parametrize("command", ["ingress", "worker", "dev"])
def test_the_redis_url_flag_is_checked_by_every_command_taking_it(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser(Settings(env={})).parse_args([command, "--redis-url", "http://:s3cret@h/0"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument --redis-url: not a Redis URL (" in err and "its scheme `http` is not redis" in err
    assert "got 'http://***@h/0'" in err and "s3cret" not in err
    assert build_parser(Settings(env={})).parse_args([command, "--redis-url", "unix:///r.sock"]).redis_url == (
        "unix:///r.sock"
    )


def test_location_names_where_a_url_points_without_credentials() -> None:
    assert location("redis://:s3cret@h:6380/2") == "h:6380"
    assert location("rediss://u:s3cret@h/0") == "h:6379"
    assert location("unix://:s3cret@/run/r.sock?db=1") == "/run/r.sock"
    assert location("redis+sentinel://:s3cret@s1,s2:26380/mymaster") == "mymaster via sentinels s1:26379,s2:26380"
    assert location("redis+sentinel://:s3cret@s1") == "redis+sentinel://***@s1"
    assert location("redis://:s3cret@h:port/0") == "redis://***@h:port/0"
