"""Dashboard sessions and login throttling, in Redis (#40 item 7).

Owns: a session as a random id (256 bits, `secrets.token_urlsafe`) that only
the browser's cookie holds; Redis keeps the SHA-256 of the id with the admin
key's lookup prefix and digest (`SessionRecord`) and an expiry, so neither a
Redis dump nor a log line holds a usable cookie or key. Logging out deletes
the record; revoking the key ends the session at its next request (the
caller re-checks the key's digest, `turnout_ingress.ui.session`).
Failed logins are counted per client and per tried key's digest in fixed
windows; while either count is at its limit, a login is refused with the
window's remaining seconds (`Retry-After`).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import hashlib
import secrets

import msgspec
from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors

SESSION_TTL_S = 8 * 3600
"""A session lasts a working day from login."""
LOGIN_FAILS_MAX = 10
"""Failed logins allowed per client, and per tried key, within one window."""
LOGIN_WINDOW_S = 300
"""The throttle's window, seconds: a client or key over `LOGIN_FAILS_MAX` waits until it ends."""


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a session holds: the admin key's clear lookup prefix (`""` for the operator key) and its SHA-256 (hex)."""

    prefix: str
    digest: str


_decode = msgspec.json.Decoder(SessionRecord)


def digest(text: str) -> str:
    """SHA-256 of `text` (a session id, a key), hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _session_key(session_id: str) -> str:
    return keys.UI_SESSION_PREFIX + digest(session_id)


def throttle_names(client: str, key_digest: str) -> tuple[str, str]:
    """The two counters a login attempt counts against: its client and the key it tried."""
    return (f"{keys.UI_LOGIN_FAILS_PREFIX}client:{client}", f"{keys.UI_LOGIN_FAILS_PREFIX}key:{key_digest}")


@maps_state_errors
class UiSessions:
    """Dashboard sessions and the login throttle over one Redis client.

    Args:
        redis: the process's client.
        ttl_s: a session's life, seconds.
        fails_max / window_s: the login throttle (`LOGIN_FAILS_MAX` per `LOGIN_WINDOW_S`).
    Every method raises `StateUnavailable` when Redis is unreachable.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        ttl_s: int = SESSION_TTL_S,
        fails_max: int = LOGIN_FAILS_MAX,
        window_s: int = LOGIN_WINDOW_S,
    ) -> None:
        self._redis = redis
        self.ttl_s = ttl_s
        self._fails_max = fails_max
        self._window_s = window_s

    async def open(self, record: SessionRecord) -> str:
        """A new session for `record`; its id (for the cookie only)."""
        session_id = secrets.token_urlsafe(32)
        await self._redis.set(_session_key(session_id), msgspec.json.encode(record), ex=self.ttl_s)
        return session_id

    async def read(self, session_id: str) -> SessionRecord | None:
        """The session's record, or None (unknown, expired or ended)."""
        raw = await self._redis.get(_session_key(session_id))
        if raw is None:
            return None
        try:
            return _decode.decode(raw)
        except msgspec.DecodeError:
            return None

    async def end(self, session_id: str) -> None:
        """End a session (logout); ending an unknown one is a no-op."""
        await self._redis.delete(_session_key(session_id))

    async def wait_s(self, names: tuple[str, ...]) -> int:
        """Seconds until a login counted under `names` may be tried again; 0 when none is at its limit."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.get(name)
                pipe.ttl(name)
            found = await pipe.execute()
        waits = [
            max(int(ttl), 1)
            for count, ttl in zip(found[::2], found[1::2], strict=True)
            if count is not None and int(count) >= self._fails_max
        ]
        return max(waits, default=0)

    async def failed(self, names: tuple[str, ...]) -> None:
        """Count one failed login under each of `names` (a window starts at its first failure)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            for name in names:
                pipe.incr(name)
                pipe.expire(name, self._window_s, nx=True)
            await pipe.execute()
