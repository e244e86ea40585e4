"""The fleet's Redis URL, checked once at start; named in errors without its password.

Owns: `redis_url_fault` (why a URL cannot be used, or None), `check_redis_url`
(the same as a `ValueError` naming the variable or flag), `redacted` (the
URL with its user and password masked) and `location` (where it points, for logs).

Why: two libraries read the URL (redis-py, and arq's parser, which read the
worker's until every client came from `turnout.state.clients`), and each
misreads a malformed one in its own way. redis-py (`redis.connection.parse_url`) raises a bare `ValueError`
for an unknown scheme or a port that is not a number, quietly takes
database 0 for `/abc`, and passes an unknown query option on to its
connection class, which refuses it only at the first command. arq's
`RedisSettings.from_dsn` (the worker's pool) raises for `/abc` and for a
lone trailing `/`. A typo therefore stopped `turnout ingress`, `turnout
worker` and `turnout dev` with a traceback, or, for `/abc`, ran the ingress
on database 0. Checked here at start, every such URL is refused with one
line naming what is wrong (exit 2), never echoing a password.

Accepted forms (redis-py's schemes, and Sentinel's; README "Configuration"):
    redis://[[user]:password@]host[:port][/db][?option=value...]
    rediss://...                  the same over TLS
    unix://[[user]:password@]/path/to/redis.sock[?db=N&...]
    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db][?sentinel_password=...]
                                  a primary found through its sentinels (`turnout.state.sentinel_url`)
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from turnout.state.sentinel_url import FORM, is_sentinel_url, parse_sentinel_url

ACCEPTED = "redis://[:password@]host[:port][/db], rediss://... for TLS, unix:///path/to/redis.sock[?db=N], or " + FORM
"""The forms named in every refusal."""

_SCHEMES = ("redis", "rediss", "unix")
_USERINFO = re.compile(r"(?<=://)[^/?#]*@")
_CREDENTIAL_OPTION = re.compile(r"(?i)([?&](?:sentinel_)?(?:password|username)=)[^&#]*")
_UNKNOWN_OPTION = re.compile(r"unexpected keyword argument '([^']*)'")


def redacted(url: str, *, limit: int = 200) -> str:
    """`url` for an error line: its user and password masked, cut to `limit` characters.

    Masks everything before `@` in the authority and the value of a
    `password`, `username`, `sentinel_password` or `sentinel_username`
    option; works on any text, parsed or not:
    `redis://:s3cret@r:6379/0` -> `redis://***@r:6379/0`,
    `redis://r/0?password=s3cret` -> `redis://r/0?password=***`.
    """
    masked = _CREDENTIAL_OPTION.sub(r"\1***", _USERINFO.sub("***@", url, count=1))
    return masked if len(masked) <= limit else masked[:limit] + "..."


def redis_url_fault(url: str) -> str | None:
    """Why `url` cannot be the fleet's Redis URL (a clause naming the part at fault), or None.

    A `redis+sentinel://` URL is read by `parse_sentinel_url` (sentinels,
    service, database, options). Others are checked, in order: that it parses
    as a URL; its scheme (`redis`, `rediss`, `unix`); a port from 1 to 65535; for `redis`/`rediss` a host and a
    database that is a whole number (path `/N`, or none); for `unix` a socket
    path; a `db` option that is a whole number; then redis-py's own reading
    of its options (`ConnectionPool.from_url` and the connection it would
    make, built without connecting). Never contacts Redis. The clause never
    holds the password.
    """
    if is_sentinel_url(url):
        try:
            parse_sentinel_url(url)
        except ValueError as exc:  # a clause naming the part at fault
            return str(exc)
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", a port that is not a number or out of range
        if "Port" in str(exc):
            return "its port is not a number from 1 to 65535"
        return f"it does not parse as a URL ({exc})"
    if not parts.scheme:
        return "it has no scheme"
    if parts.scheme not in _SCHEMES:
        return f"its scheme `{parts.scheme}` is not redis, rediss, unix or redis+sentinel"
    if port == 0 or (port is None and parts.netloc.rpartition("@")[2].endswith(":")):
        return "its port is not a number from 1 to 65535"
    if parts.scheme == "unix":
        if not parts.path.strip("/"):
            return "it names no socket path"
    else:
        if not parts.hostname:
            return "it names no host"
        database = parts.path.removeprefix("/")
        if database and not database.isdigit():
            return f"its database `{database}` is not a whole number"
    for value in parse_qs(parts.query).get("db", [])[:1]:
        if not value.isdigit():
            return f"its db option `{value}` is not a whole number"
    return _library_fault(url)


def _library_fault(url: str) -> str | None:
    """What redis-py says of `url`'s options (a clause), or None: it builds a connection without connecting."""
    import redis

    try:
        redis.ConnectionPool.from_url(url).make_connection()  # type: ignore[no-untyped-call]
    except TypeError as exc:  # an option the connection class does not take
        unknown = _UNKNOWN_OPTION.search(str(exc))
        return f"its option `{unknown.group(1)}` is not one the Redis client knows" if unknown else str(exc)
    except ValueError as exc:  # "Invalid value for 'socket_timeout' in connection URL."
        return f"the Redis client refused it: {exc}"
    return None


def check_redis_url(url: str, *, name: str) -> str:
    """`url` when `redis_url_fault` finds nothing.

    Args:
        name: the variable or flag it came from (`TURNOUT_REDIS_URL`, `--redis-url`).

    Raises:
        ValueError: `<name> must be a Redis URL (<forms>): <why>; got '<url, user and password masked>'`.
    """
    fault = redis_url_fault(url)
    if fault is not None:
        raise ValueError(f"{name} must be a Redis URL ({ACCEPTED}): {fault}; got {redacted(url)!r}")
    return url


def location(url: str) -> str:
    """Where `url` points, for a log line, without credentials: `host:port` (6379 when absent), a
    Unix socket's path, or `<service> via sentinels host:port,...`; an unreadable URL `redacted`."""
    if is_sentinel_url(url):
        try:
            address = parse_sentinel_url(url)
        except ValueError:
            return redacted(url)
        return f"{address.service} via sentinels " + ",".join(f"{h}:{p}" for h, p in address.sentinels)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return redacted(url)
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname}:{port or 6379}"
