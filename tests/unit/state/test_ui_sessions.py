"""Dashboard sessions in Redis: a random id whose hash is stored, ended by logout; failed logins throttled."""

from __future__ import annotations

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.ui_sessions import SessionRecord, UiSessions, digest, throttle_names

RECORD = SessionRecord(prefix="tk-abcdefgh", digest=digest("tk-abcdefgh-secret"))


async def test_a_session_is_a_random_id_stored_hashed_with_the_keys_digest_and_an_expiry(redis_client: Redis) -> None:
    sessions = UiSessions(redis_client)
    first, second = await sessions.open(RECORD), await sessions.open(RECORD)
    assert first != second and len(first) >= 43  # 256 random bits
    stored = [k.decode() async for k in redis_client.scan_iter(match=keys.UI_SESSION_PREFIX + "*")]
    assert sorted(stored) == sorted(keys.UI_SESSION_PREFIX + digest(s) for s in (first, second))
    raw = b"".join([await redis_client.get(k) or b"" for k in stored])
    assert first.encode() not in raw and b"tk-abcdefgh-secret" not in raw  # neither the id nor the key
    assert 0 < await redis_client.ttl(stored[0]) <= sessions.ttl_s
    assert await sessions.read(first) == RECORD


async def test_logout_ends_the_session_and_an_unknown_id_reads_as_none(redis_client: Redis) -> None:
    sessions = UiSessions(redis_client)
    session_id = await sessions.open(RECORD)
    await sessions.end(session_id)
    assert await sessions.read(session_id) is None
    assert await sessions.read("tk-the-admin-key-itself") is None  # an old cookie holding the key


async def test_failed_logins_are_throttled_per_client_and_per_key_until_the_window_ends(redis_client: Redis) -> None:
    sessions = UiSessions(redis_client, fails_max=3, window_s=300)
    names = throttle_names("10.0.0.1", digest("wrong"))
    for _ in range(3):
        assert await sessions.wait_s(names) == 0
        await sessions.failed(names)
    assert 0 < await sessions.wait_s(names) <= 300
    assert 0 < await sessions.wait_s(throttle_names("10.0.0.2", digest("wrong"))) <= 300  # the same key elsewhere
    assert 0 < await sessions.wait_s(throttle_names("10.0.0.1", digest("other"))) <= 300  # the same client
    assert await sessions.wait_s(throttle_names("10.0.0.2", digest("other"))) == 0
