"""The Responses conversation store against a real `redis-server`: scoped to org and key, expiry by
the injected clock and by Redis's TTL, the per-org cap evicting the oldest, the size cap, and
Redis errors mapped to `StateUnavailable`."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import StateUnavailable
from turnout.state.org_purge import purge_org_state
from turnout.state.response_store import ResponseStore

NOW = 1_796_131_500.0
TTL_S = 3600


class Clock:
    def __init__(self) -> None:
        self.now_s = NOW

    def __call__(self) -> float:
        return self.now_s


def _store(redis: Redis, clock: Clock, *, per_org: int = 100, max_bytes: int = 100_000) -> ResponseStore:
    return ResponseStore(redis, ttl_s=TTL_S, per_org=per_org, max_bytes=max_bytes, clock=clock)


def _response(rid: str) -> dict[str, Any]:
    return {"id": rid, "object": "response", "status": "completed", "output": []}


MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
ITEMS = [{"id": "msg_in_1_0", "type": "message", "role": "user", "content": [], "status": "completed"}]


async def test_a_stored_response_reads_back_for_its_org_and_key_only(redis_client: Redis) -> None:
    store = _store(redis_client, Clock())
    assert await store.put("acme", "main", _response("resp_1"), ITEMS, MESSAGES) == 0
    found = await store.get("acme", "main", "resp_1")
    assert found is not None and found.response == _response("resp_1")
    assert (found.messages, found.input_items, found.expires_at_s) == (MESSAGES, ITEMS, NOW + TTL_S)
    assert await store.get("acme", "other", "resp_1") is None
    assert await store.get("globex", "main", "resp_1") is None
    assert await store.get("acme", "main", "resp_2") is None
    assert await store.get("acme", "main", "") is None and await store.get("acme", "main", "x" * 500) is None


async def test_the_conversation_items_are_kept_and_an_older_document_reads_without_them(redis_client: Redis) -> None:
    store = _store(redis_client, Clock())
    conversation = [{"role": "user", "content": "hi"}, {"type": "web_search_call", "id": "ws_1"}]
    await store.put("acme", "main", _response("resp_i"), ITEMS, MESSAGES, conversation)
    found = await store.get("acme", "main", "resp_i")
    assert found is not None and found.items == conversation
    await store.put("acme", "main", _response("resp_old"), ITEMS, MESSAGES)  # no items, as the version before
    older = await store.get("acme", "main", "resp_old")
    assert older is not None and older.items is None


async def test_an_expired_response_reads_as_absent_and_redis_expires_it_too(redis_client: Redis) -> None:
    clock = Clock()
    store = _store(redis_client, clock)
    await store.put("acme", "main", _response("resp_1"), ITEMS, MESSAGES)
    assert 0 < await redis_client.ttl(keys.response_key("acme", "resp_1")) <= TTL_S
    clock.now_s = NOW + TTL_S - 1
    assert await store.get("acme", "main", "resp_1") is not None
    clock.now_s = NOW + TTL_S
    assert await store.get("acme", "main", "resp_1") is None


async def test_the_per_org_cap_evicts_the_oldest_of_that_org_only(redis_client: Redis) -> None:
    clock = Clock()
    store = _store(redis_client, clock, per_org=3)
    await store.put("globex", "main", _response("resp_g"), ITEMS, MESSAGES)
    for n in range(3):
        clock.now_s = NOW + n
        assert await store.put("acme", "main", _response(f"resp_{n}"), ITEMS, MESSAGES) == 0
    clock.now_s = NOW + 3
    assert await store.put("acme", "main", _response("resp_3"), ITEMS, MESSAGES) == 1
    assert await store.get("acme", "main", "resp_0") is None
    assert all([await store.get("acme", "main", f"resp_{n}") for n in (1, 2, 3)])
    assert await store.get("globex", "main", "resp_g") is not None
    assert await redis_client.zcard(keys.response_index_key("acme")) == 3


async def test_index_entries_past_the_ttl_are_trimmed_on_the_next_put(redis_client: Redis) -> None:
    clock = Clock()
    store = _store(redis_client, clock)
    await store.put("acme", "main", _response("resp_old"), ITEMS, MESSAGES)
    clock.now_s = NOW + TTL_S + 1
    await store.put("acme", "main", _response("resp_new"), ITEMS, MESSAGES)
    assert await redis_client.zrange(keys.response_index_key("acme"), 0, -1) == [b"resp_new"]


async def test_a_document_over_the_size_cap_is_not_kept(redis_client: Redis) -> None:
    store = _store(redis_client, Clock(), max_bytes=2048)
    big = [{"role": "user", "content": "x" * 4096}]
    assert await store.put("acme", "main", _response("resp_big"), ITEMS, big) is None
    assert await store.get("acme", "main", "resp_big") is None


async def test_delete_is_scoped_and_reports_whether_it_deleted(redis_client: Redis) -> None:
    store = _store(redis_client, Clock())
    await store.put("acme", "main", _response("resp_1"), ITEMS, MESSAGES)
    assert not await store.delete("acme", "other", "resp_1")
    assert await store.get("acme", "main", "resp_1") is not None
    assert await store.delete("acme", "main", "resp_1")
    assert await store.get("acme", "main", "resp_1") is None
    assert not await store.delete("acme", "main", "resp_1")
    assert await redis_client.zcard(keys.response_index_key("acme")) == 0


async def test_an_org_id_cannot_reach_another_orgs_keys(redis_client: Redis) -> None:
    store = _store(redis_client, Clock())
    await store.put("a", "main", _response("b:resp_1"), ITEMS, MESSAGES)
    assert await store.get("a:b", "main", "resp_1") is None


async def test_purging_an_org_removes_its_stored_responses(redis_client: Redis) -> None:
    store = _store(redis_client, Clock())
    await store.put("acme", "main", _response("resp_1"), ITEMS, MESSAGES)
    await store.put("globex", "main", _response("resp_2"), ITEMS, MESSAGES)
    assert await purge_org_state(redis_client, "acme") == 2
    assert await store.get("acme", "main", "resp_1") is None
    assert await store.get("globex", "main", "resp_2") is not None


async def test_an_unreachable_redis_is_state_unavailable() -> None:
    broken = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    store = _store(broken, Clock())
    with pytest.raises(StateUnavailable):
        await store.put("acme", "main", _response("resp_1"), ITEMS, MESSAGES)
    with pytest.raises(StateUnavailable):
        await store.get("acme", "main", "resp_1")
    with pytest.raises(StateUnavailable):
        await store.delete("acme", "main", "resp_1")
    await broken.aclose()
