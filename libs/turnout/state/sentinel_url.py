"""A `redis+sentinel://` URL: the sentinels to ask, the primary's service name, its database.

Owns: `SentinelAddress` and `parse_sentinel_url` (the URL read into one, or a
`ValueError` whose message is a clause naming the part at fault, never the
password). The clients built from it are `turnout.state.clients`'.

Why: a Redis primary that fails over (Redis Sentinel promoting a replica) moves
to another host; the fleet must ask the sentinels where the primary is, and ask
again after a connection error. redis-py reads `redis://`, `rediss://` and
`unix://` URLs but has no URL form for Sentinel; its `Sentinel` client takes
the sentinels' addresses and the service name as arguments. This form carries
them in the one URL every Turnout process already takes (`TURNOUT_REDIS_URL`,
`--redis-url`).

Form (README "Configuration"):
    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db][?option=value...]

- host: a sentinel (a name, an IPv4 address, or an IPv6 address in brackets);
  its port defaults to 26379, the sentinel's own.
- user / password: the primary's (Redis `AUTH`), as in a `redis://` URL.
- service: the name the sentinels monitor (`sentinel monitor <service> ...`).
- db: the database on the primary (default 0).
- options: `sentinel_password` and `sentinel_username` (the sentinels' own
  `requirepass` / ACL user, when they have one), `db` (as the path's), `ssl`
  (`true`: TLS to the primary and the sentinels).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qsl, unquote

SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
FORM = "redis+sentinel://[:password@]host[:port][,host[:port]...]/service[/db]"
"""The form named in a refusal."""

OPTIONS = ("sentinel_password", "sentinel_username", "db", "ssl")
"""The query options this form takes."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class SentinelAddress:
    """Where a Sentinel-managed primary is found (module doc).

    Attributes:
        sentinels: the sentinels' (host, port) pairs, in the URL's order (at least one).
        service: the monitored service's name.
        db: the primary's database number.
        username / password: the primary's credentials, or None.
        sentinel_username / sentinel_password: the sentinels' own, or None.
        ssl: TLS to the primary and the sentinels.
    """

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = dataclasses.field(default=None, repr=False)
    password: str | None = dataclasses.field(default=None, repr=False)
    sentinel_username: str | None = dataclasses.field(default=None, repr=False)
    sentinel_password: str | None = dataclasses.field(default=None, repr=False)
    ssl: bool = False


def is_sentinel_url(url: str) -> bool:
    """True when `url`'s scheme is `redis+sentinel` (any case)."""
    return url[: len(SCHEME) + 3].lower() == SCHEME + "://"


def parse_sentinel_url(url: str) -> SentinelAddress:
    """Read a `redis+sentinel://` URL (module doc); never contacts a sentinel.

    Raises:
        ValueError: a clause naming what is wrong (`it names no service`, `its sentinel
            `h:99999` has no port from 1 to 65535`, ...); never the password.
    """
    if not is_sentinel_url(url):
        raise ValueError(f"its scheme is not {SCHEME}")
    rest = url[len(SCHEME) + 3 :]
    if "#" in rest:
        raise ValueError("it has a fragment (`#...`), which a Redis URL does not take")
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_sentinel(part) for part in hosts.split(","))
    service, _, database = path.partition("/")
    service = unquote(service)
    if not service:
        raise ValueError("it names no service (the path's first part: the name the sentinels monitor)")
    if "/" in database:
        raise ValueError(f"its path has more than a service and a database (`/{service}/{database}`)")
    options = _options(query)
    if database and "db" in options:
        raise ValueError("it gives the database twice (the path and the `db` option)")
    db = _whole(database or options.get("db", ""), "database")
    return SentinelAddress(
        sentinels=sentinels,
        service=service,
        db=db,
        username=username,
        password=password,
        sentinel_username=options.get("sentinel_username") or None,
        sentinel_password=options.get("sentinel_password") or None,
        ssl=_switch(options.get("ssl", "false")),
    )


def _sentinel(text: str) -> tuple[str, int]:
    """One `host[:port]` of the list; port 26379 when absent. Raises ValueError naming it."""
    if not text:
        raise ValueError("it names no sentinel host (an empty entry in the host list)")
    if text.startswith("["):  # an IPv6 address: [::1]:26379
        host, bracket, tail = text[1:].partition("]")
        if not bracket or not host or (tail and not tail.startswith(":")):
            raise ValueError(f"its sentinel `{text}` is not a host[:port] (an IPv6 address goes in brackets)")
        port_text = tail[1:] if tail else None
    else:
        host, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
        if not host:
            raise ValueError(f"its sentinel `{text}` names no host")
        if ":" in port_text_or_empty:
            raise ValueError(f"its sentinel `{text}` is not a host[:port] (an IPv6 address goes in brackets)")
    if port_text is None:
        return host, DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"its sentinel `{text}` has no port from 1 to 65535")
    return host, int(port_text)


def _options(query: str) -> dict[str, str]:
    """The query's options; ValueError naming an unknown or repeated one."""
    found: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in OPTIONS:
            raise ValueError(f"its option `{name}` is not one of {', '.join(OPTIONS)}")
        if name in found:
            raise ValueError(f"its option `{name}` is given twice")
        found[name] = value
    return found


def _whole(text: str, what: str) -> int:
    if not text:
        return 0
    if not text.isdigit():
        raise ValueError(f"its {what} `{text}` is not a whole number")
    return int(text)


def _switch(text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(f"its option `ssl` is `{text}`, not true or false")
