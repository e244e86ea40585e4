"""`redis+sentinel://` URLs: read into the sentinels, the service and the database; every malformed
one refused with its fault named and no password shown; the clients the fleet builds from one follow
the primary through redis-py's Sentinel pool."""

from __future__ import annotations

import pytest
import redis.sentinel
from arq.connections import ArqRedis
from hypothesis import given
from hypothesis import strategies as st

from turnout.settings import Settings, SettingsError
from turnout.state.clients import SENTINEL_TIMEOUT_S, async_client, blocking_client
from turnout.state.pool import BufferCheckedSentinelPool
from turnout.state.redis_url import check_redis_url, redacted, redis_url_fault
from turnout.state.sentinel_url import SentinelAddress, is_sentinel_url, parse_sentinel_url
from turnout_cli.main import build_parser


def test_a_full_url_is_read_into_sentinels_service_database_and_credentials() -> None:
    url = "redis+sentinel://app:s3cret@s1:26380,10.0.0.2,[::1]:26381/mymaster/3?sentinel_password=sp&ssl=true"
    address = parse_sentinel_url(url)
    assert address == SentinelAddress(
        sentinels=(("s1", 26380), ("10.0.0.2", 26379), ("::1", 26381)),
        service="mymaster",
        db=3,
        username="app",
        password="s3cret",
        sentinel_password="sp",
        ssl=True,
    )
    assert "s3cret" not in repr(address) and "sp'" not in repr(address)
    assert redis_url_fault(url) is None and check_redis_url(url, name="X") == url


def test_the_short_form_takes_the_sentinel_port_and_database_0() -> None:
    address = parse_sentinel_url("REDIS+SENTINEL://h/svc")
    assert (address.sentinels, address.service, address.db, address.password) == ((("h", 26379),), "svc", 0, None)
    assert parse_sentinel_url("redis+sentinel://:pw@h/svc?db=2").db == 2
    assert parse_sentinel_url("redis+sentinel://:pw@h/svc/").db == 0


def test_a_refusal_names_the_sentinel_form() -> None:
    with pytest.raises(ValueError) as caught:
        check_redis_url("redis+sentinel://:s3cret@h1:26379", name="TURNOUT_REDIS_URL")
    message = str(caught.value)
    assert "redis+sentinel://[:password@]host[:port][,host[:port]...]/service[/db]" in message
    assert "it names no service" in message and "s3cret" not in message


def test_redacted_masks_the_sentinels_password_option() -> None:
    url = "redis+sentinel://:s3cret@h1,h2/svc?sentinel_password=t0p&sentinel_username=me"
    assert redacted(url) == "redis+sentinel://***@h1,h2/svc?sentinel_password=***&sentinel_username=***"


_HOST = st.sampled_from(["h", "10.0.0.1", "[::1]", "", "[::1", "::1", "s-1.internal"])
_PORT = st.one_of(st.none(), st.integers(-5, 70_000).map(str), st.sampled_from(["", "x"]))
_PASSWORD = st.from_regex(r"PW[0-9]{6}", fullmatch=True)


@given(
    hosts=st.lists(st.tuples(_HOST, _PORT), min_size=0, max_size=3),
    service=st.sampled_from(["", "mymaster", "svc-2"]),
    db=st.sampled_from([None, "", "0", "7", "x"]),
    password=_PASSWORD,
    sentinel_password=st.one_of(st.none(), _PASSWORD),
)
def test_a_sentinel_url_is_read_exactly_or_refused_without_a_password(
    hosts: list[tuple[str, str | None]], service: str, db: str | None, password: str, sentinel_password: str | None
) -> None:
    listed = ",".join(host + ("" if port is None else f":{port}") for host, port in hosts)
    url = f"redis+sentinel://:{password}@{listed}/{service}" + ("" if db is None else f"/{db}")
    if sentinel_password is not None:
        url += f"?sentinel_password={sentinel_password}"
    fault = redis_url_fault(url)
    if fault is not None:
        assert password not in fault and (sentinel_password is None or sentinel_password not in fault)
        return
    address = parse_sentinel_url(url)
    assert address.service == service and address.password == password
    assert address.sentinel_password == sentinel_password
    assert address.db == int(db or 0)
    assert [h for h, _ in address.sentinels] == [h.strip("[]") for h, _ in hosts]
    assert [p for _, p in address.sentinels] == [26379 if port is None else int(port) for _, port in hosts]
    assert all(1 <= p <= 65535 for _, p in address.sentinels)


@given(st.text(max_size=60))
def test_any_text_after_the_scheme_gets_a_verdict_never_an_exception(text: str) -> None:
    url = "redis+sentinel://" + text
    assert is_sentinel_url(url)
    fault = redis_url_fault(url)
    assert fault is None or isinstance(fault, str)


def test_the_async_client_follows_the_primary_through_the_sentinels() -> None:
    url = "redis+sentinel://:pw@s1:26380,s2/svc/2?sentinel_password=sp"
    client = async_client(url, redis_class=ArqRedis, socket_connect_timeout=1.0, socket_timeout=2.0)
    assert isinstance(client, ArqRedis)
    pool = client.connection_pool
    assert isinstance(pool, BufferCheckedSentinelPool) and pool.service_name == "svc" and pool.is_master
    assert pool.connection_kwargs["db"] == 2 and pool.connection_kwargs["password"] == "pw"
    assert pool.connection_kwargs["socket_timeout"] == 2.0
    assert pool.connection_class.__name__.startswith("HiredisPacking")  # hiredis packs its commands
    sentinels = pool.sentinel_manager.sentinels
    kwargs = [s.connection_pool.connection_kwargs for s in sentinels]
    assert [(k["host"], k["port"]) for k in kwargs] == [("s1", 26380), ("s2", 26379)]
    assert all(k["password"] == "sp" for k in kwargs)
    assert all(k["socket_timeout"] == SENTINEL_TIMEOUT_S and k["socket_connect_timeout"] == 0.5 for k in kwargs)


def test_a_listener_without_a_read_timeout_still_bounds_its_sentinel_queries() -> None:
    client = async_client("redis+sentinel://s1/svc", socket_connect_timeout=0.5)
    pool = client.connection_pool
    assert isinstance(pool, BufferCheckedSentinelPool)
    assert "socket_timeout" not in pool.connection_kwargs  # pub/sub waits on the primary
    for sentinel in pool.sentinel_manager.sentinels:
        assert sentinel.connection_pool.connection_kwargs["socket_timeout"] == SENTINEL_TIMEOUT_S


def test_the_blocking_client_follows_the_primary_too() -> None:
    with blocking_client("redis+sentinel://s1:26400/svc?ssl=true", socket_connect_timeout=3) as client:
        pool = client.connection_pool
        assert isinstance(pool, redis.sentinel.SentinelConnectionPool) and pool.service_name == "svc"
        assert pool.connection_class is redis.sentinel.SentinelManagedSSLConnection
        sentinel = pool.sentinel_manager.sentinels[0]
        assert sentinel.connection_pool.connection_kwargs["socket_connect_timeout"] == SENTINEL_TIMEOUT_S


def test_settings_and_flags_take_a_sentinel_url_and_name_a_bad_one() -> None:
    url = "redis+sentinel://h1:26379,h2:26379/mymaster"
    assert Settings.from_env({"TURNOUT_REDIS_URL": url}).redis_url == url
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"TURNOUT_REDIS_URL": "redis+sentinel://:s3cret@h1:26379"})
    assert "it names no service" in str(caught.value) and "s3cret" not in str(caught.value)
    assert build_parser(Settings(env={})).parse_args(["worker", "--redis-url", url]).redis_url == url
