"""The tenancy store and directory against a real redis-server: atomic writes, invalidation, the bound."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import cast

import msgspec
import pytest
from redis.asyncio import Redis

from support.waiting import eventually
from turnout.config import parse_config
from turnout.rules.ssrf import AllowList
from turnout.state import keys
from turnout.state.tenant_store import TenantStore
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import KeyCreate, SquadCreate, add_key, add_squad, revoke_key
from turnout.tenancy.bootstrap import bootstrap
from turnout.tenancy.directory import TenantDirectory
from turnout.vault import Vault, generate_key

CONFIG = parse_config(
    """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
models:
  m1: {offers: [{provider: a, model: m1}]}
orgs:
  acme:
    provider_keys: {a: byok-secret-0001}
    keys:
      - {name: main, key: tk-main-key-00000001}
""",
    env={},
)
VAULT = Vault([generate_key()])
NOW_S = 1_800_000_000.0
"""The directories' epoch clock (key expiry, revocation times): fixed, never the real one."""


def directory(redis: Redis, clock: Callable[[], float] = lambda: NOW_S, poll_s: float = 1.0) -> TenantDirectory:
    return TenantDirectory(CONFIG, TenantStore(redis), VAULT, AllowList(), clock=clock, poll_s=poll_s)


async def test_write_is_compare_and_set_on_the_org_version(redis_client: Redis) -> None:
    store = TenantStore(redis_client)
    v1 = await store.write(OrgDoc(id="acme"), "acme", 0)
    assert v1 == 1
    assert await store.write(OrgDoc(id="acme", created_s=5.0), "acme", 0) is None  # stale expectation
    v2 = await store.write(OrgDoc(id="acme", created_s=5.0), "acme", v1)
    assert v2 == 2 and await store.version() == 2
    doc, version = await store.load("acme")
    assert doc is not None and doc.created_s == 5.0 and version == 2
    assert await store.write(None, "acme", 2) == 3
    assert await store.load("acme") == (None, 0)
    assert await store.deleted("acme")


async def test_concurrent_updates_all_land(redis_client: Redis) -> None:
    store = TenantStore(redis_client)
    await store.write(OrgDoc(id="acme"), "acme", 0)

    async def add(i: int) -> None:
        await store.update("acme", lambda d: (add_squad(d, SquadCreate(name=f"s{i}"), 1.0), None))  # type: ignore[arg-type]

    await asyncio.gather(*(add(i) for i in range(10)))
    doc, _ = await store.load("acme")
    assert doc is not None and sorted(doc.squads) == sorted(f"s{i}" for i in range(10))


async def test_bootstrap_is_idempotent_and_writes_nothing_the_second_time(redis_client: Redis) -> None:
    store = TenantStore(redis_client)
    first = await bootstrap(store, CONFIG, VAULT, AllowList())
    assert first == {"acme": ["settings", "keys.main", "provider_keys.a"]}
    version = await store.version()
    assert await bootstrap(store, CONFIG, VAULT, AllowList()) == {}
    assert await store.version() == version
    raw = await redis_client.get(keys.tenancy_org_key("acme"))
    assert b"byok-secret-0001" not in raw and b"tk-main-key-00000001" not in raw


async def test_directory_authenticates_revokes_and_expires(redis_client: Redis) -> None:
    now = [1000.0]
    store = TenantStore(redis_client)
    await bootstrap(store, CONFIG, VAULT, AllowList())
    d = directory(redis_client, clock=lambda: now[0])
    before = (d.loaded, d.authenticate("tk-main-key-00000001"))
    await d.refresh()
    assert before == (False, None) and d.loaded, "unread, no key is known yet; read once, loaded"
    identity = d.authenticate("tk-main-key-00000001")
    assert identity is not None and identity.org == "acme" and identity.key == "main"
    assert d.authenticate("tk-main-key-00000002") is None and d.authenticate("") is None
    credentials = d.credentials("acme")
    assert credentials is not None and credentials.own_key("a") == "byok-secret-0001"
    assert credentials.own_key("b") is None

    await store.update(
        "acme",
        lambda doc: add_key(
            doc,  # type: ignore[arg-type]
            KeyCreate(name="tmp", ttl_s=60),
            "tk-temporary-0000001",
            now[0],
        ),
    )
    assert await d.refresh()
    assert d.authenticate("tk-temporary-0000001") is not None
    now[0] += 61
    assert d.authenticate("tk-temporary-0000001") is None
    await store.update("acme", lambda doc: (revoke_key(doc, "main", now[0]), None))  # type: ignore[arg-type]
    await d.refresh()
    assert d.authenticate("tk-main-key-00000001") is None


async def test_every_watching_directory_sees_a_write_within_the_bound(redis_client: Redis, redis_url: str) -> None:
    store = TenantStore(redis_client)
    await bootstrap(store, CONFIG, VAULT, AllowList())
    listeners = [Redis.from_url(redis_url) for _ in range(3)]
    # No periodic re-check within the test: only the write's pub/sub message can deliver it.
    directories = [directory(redis_client, poll_s=3600.0) for _ in listeners]
    try:
        for d, listen in zip(directories, listeners):
            await d.start(listen)
        assert all(d.authenticate("tk-main-key-00000001") is not None for d in directories)
        await store.update("acme", lambda doc: (revoke_key(doc, "main", NOW_S), None))  # type: ignore[arg-type]
        await eventually(lambda: all(d.authenticate("tk-main-key-00000001") is None for d in directories))
    finally:
        for d in directories:
            await d.stop()
        for listen in listeners:
            await listen.aclose()


async def test_a_missed_invalidation_is_caught_by_the_periodic_check(redis_client: Redis, redis_url: str) -> None:
    store = TenantStore(redis_client)
    await bootstrap(store, CONFIG, VAULT, AllowList())
    listen = Redis.from_url(redis_url)
    d = directory(redis_client, poll_s=0.3)
    try:
        await d.start(listen)
        doc, version = await store.load("acme")
        assert doc is not None
        revoked = revoke_key(doc, "main", NOW_S)
        # a write that publishes nothing (as if the message were lost)
        await redis_client.set(keys.tenancy_org_key("acme"), msgspec.json.encode(revoked))
        await cast(Awaitable[int], redis_client.hset(keys.TENANCY_ORGS, "acme", str(version + 1)))
        await redis_client.incr(keys.TENANCY_VERSION)
        await eventually(lambda: d.authenticate("tk-main-key-00000001") is None)  # no message came: the re-check
    finally:
        await d.stop()
        await listen.aclose()


async def test_bootstrap_refusal_surfaces_at_start(redis_client: Redis, redis_url: str) -> None:
    bad = parse_config(
        """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
models:
  m1: {offers: [{provider: a, model: m1}]}
orgs:
  acme:
    custom_endpoints: {meta: {base_url: "https://10.0.0.5/v1"}}
""",
        env={"TURNOUT_SSRF_ALLOW": "10.0.0.0/8"},  # the file passes where it was checked; this ingress allows less
    )
    listen = Redis.from_url(redis_url)
    d = TenantDirectory(bad, TenantStore(redis_client), VAULT, AllowList())
    try:
        with pytest.raises(Exception, match=r"orgs\.acme\.custom_endpoints\.meta\.base_url: refused"):
            await d.start(listen, bootstrap=True)
    finally:
        await d.stop()
        await listen.aclose()
