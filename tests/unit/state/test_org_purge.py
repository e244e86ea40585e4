"""What a deleted org leaves in Redis is removed, and only its own (`turnout.state.org_purge`), on a real redis-server."""

from __future__ import annotations

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.org_purge import org_state_patterns, purge_org_state


def _state_of(org: str) -> list[str]:
    return [
        keys.spend_key(org, "day", "2026-12-04"),
        keys.spend_key(org, "month", "2026-12"),
        keys.idempotency_key(org, "main", "order-1"),
        keys.limit_key("org", org, None, "rpm"),
        keys.limit_key("squad", org, "research", "tpm"),
        keys.limit_key("key", org, "main", "conc"),
    ]


async def test_an_orgs_spend_limits_and_idempotency_keys_go_and_no_other_orgs(redis_client: Redis) -> None:
    neighbours = [*_state_of("acme2"), *_state_of("acm"), keys.limit_key("key", "other", "acme", "rpm")]
    for key in [*_state_of("acme"), *neighbours, keys.tenancy_org_key("acme"), keys.RECORDS_STREAM]:
        await redis_client.set(key, "1")
    for batch in (1, 2, 500):  # any SCAN step finds them all
        for key in _state_of("acme"):
            await redis_client.set(key, "1")
        assert await purge_org_state(redis_client, "acme", batch=batch) == len(_state_of("acme"))
    remaining = {k.decode() for k in await redis_client.keys("*")}
    assert remaining == {*neighbours, keys.tenancy_org_key("acme"), keys.RECORDS_STREAM}
    assert await purge_org_state(redis_client, "acme") == 0


def test_glob_characters_in_an_org_id_match_only_themselves() -> None:
    patterns = org_state_patterns("a*[b]?")
    assert patterns[0] == keys.SPEND_PREFIX + r"a\*\[b\]\?:*"
    assert all("a*" not in p for p in patterns)
