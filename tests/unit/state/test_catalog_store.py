"""The catalog store, the bootstrap and the watch against a real redis-server: versioned atomic writes,
the file rule, and propagation by message and by the version re-check."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest
from redis.asyncio import Redis

from support.waiting import eventually
from turnout.catalog.doc import doc_from_config
from turnout.catalog.live import LiveCatalog
from turnout.catalog.seed import seed
from turnout.catalog.watch import CatalogWatch
from turnout.config import parse_config
from turnout.state import keys
from turnout.state.catalog_store import CatalogConflict, CatalogStore
from turnout.stored.catalog import CatalogDoc, doc_encoder
from turnout.vault import Vault, generate_key

TEXT = """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: sk-file-key-a-0001}
models:
  m1: {offers: [{provider: a, model: m1}]}
"""
FILE = parse_config(TEXT, env={})
NEWER = parse_config(TEXT + "  m2: {offers: [{provider: a, model: m2}]}\n", env={})
VAULT = Vault([generate_key()])


def with_model(doc: CatalogDoc, name: str) -> CatalogDoc:
    return msgspec.structs.replace(doc, models={**doc.models, name: doc.models["m1"]}, origin="api")


async def test_a_write_is_versioned_and_compare_and_set(redis_client: Redis) -> None:
    store = CatalogStore(redis_client)
    assert await store.load() == (None, 0)
    doc = doc_from_config(FILE, VAULT)
    assert await store.write(doc, 0, remember_file=doc.file_digest) == 1
    assert await store.write(doc, 0) is None  # a second seeder loses: nothing changes
    assert await store.load() == (doc, 1)
    assert await store.applied(doc.file_digest)
    assert await store.write(with_model(doc, "m2"), 1) == 2
    loaded, version = await store.load()
    assert version == 2 and loaded is not None and set(loaded.models) == {"m1", "m2"}


async def test_concurrent_edits_lose_nothing(redis_client: Redis) -> None:
    store = CatalogStore(redis_client)
    await store.write(doc_from_config(FILE, VAULT), 0)

    async def add(name: str) -> None:
        await store.update(lambda doc: (with_model(doc, name) if doc is not None else None, None))

    await asyncio.gather(*(add(f"x{i}") for i in range(8)))
    doc, version = await store.load()
    assert doc is not None and set(doc.models) == {"m1", *(f"x{i}" for i in range(8))}
    assert version == 9


async def test_an_update_that_raises_or_changes_nothing_writes_nothing(redis_client: Redis) -> None:
    store = CatalogStore(redis_client)
    await store.write(doc_from_config(FILE, VAULT), 0)

    def refuse(doc: CatalogDoc | None) -> tuple[CatalogDoc | None, None]:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        await store.update(refuse)
    assert await store.update(lambda doc: (doc, "same")) == ((await store.load())[0], "same", None)
    assert await store.version() == 1


async def test_an_update_that_keeps_losing_the_race_says_so(
    redis_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CatalogStore(redis_client)
    await store.write(doc_from_config(FILE, VAULT), 0)

    def edit_while_a_rival_writes(doc: CatalogDoc | None) -> tuple[CatalogDoc | None, None]:
        assert doc is not None
        rivals.append(asyncio.ensure_future(redis_client.incr(keys.CATALOG_VERSION)))
        return with_model(doc, "mine"), None

    rivals: list[asyncio.Future[int]] = []
    real_write = store.write

    async def write_after_the_rival(doc: CatalogDoc, expected: int, *, remember_file: str = "") -> int | None:
        await rivals[-1]
        return await real_write(doc, expected, remember_file=remember_file)

    monkeypatch.setattr(store, "write", write_after_the_rival)
    with pytest.raises(CatalogConflict):
        await store.update(edit_while_a_rival_writes)
    doc, _ = await store.load()
    assert doc is not None and "mine" not in doc.models


async def test_the_bootstrap_rule_against_redis(redis_client: Redis, caplog: pytest.LogCaptureFixture) -> None:
    store = CatalogStore(redis_client)
    assert await seed(store, FILE, VAULT) == "seeded"
    assert await seed(store, FILE, VAULT) == "kept"  # a restart writes nothing
    assert await store.version() == 1
    assert await seed(store, NEWER, VAULT) == "applied"  # a changed file is applied once
    assert await seed(store, FILE, VAULT) == "applied"  # and a rollback to the earlier file applies too
    doc, _ = await store.load()
    assert doc is not None and set(doc.models) == {"m1"}
    assert await store.update(lambda d: (with_model(d, "admin") if d else None, None))  # created through the API
    assert await store.update(lambda d: (edit_m1(d) if d else None, None))  # and an edit of the file's m1
    caplog.clear()
    third = parse_config(
        TEXT.replace("model: m1}", "model: m1-new}") + "  m3: {offers: [{provider: a, model: m3}]}\n", env={}
    )
    with caplog.at_level(logging.WARNING, logger="turnout.catalog"):
        assert await seed(store, third, VAULT) == "applied"  # m3 written; the API's m1 and admin kept
    assert "kept the admin API's edits of models.m1" in caplog.text
    doc, _ = await store.load()
    assert doc is not None and set(doc.models) == {"m1", "admin", "m3"}
    assert doc.models["m1"].offers[0].model == "edited"
    assert await seed(store, FILE, VAULT) == "applied"  # m3 goes (the file wrote it); admin stays
    doc, _ = await store.load()
    assert doc is not None and set(doc.models) == {"m1", "admin"} and doc.models["m1"].offers[0].model == "edited"
    assert await seed(store, third, VAULT, force=True) == "forced"
    doc, _ = await store.load()
    assert doc is not None and set(doc.models) == {"m1", "m3"} and doc.models["m1"].offers[0].model == "m1-new"
    assert await seed(store, third, VAULT, force=True) == "kept"  # asked, but Redis holds this very file


def edit_m1(doc: CatalogDoc) -> CatalogDoc:
    offer = msgspec.structs.replace(doc.models["m1"].offers[0], model="edited")
    model = msgspec.structs.replace(doc.models["m1"], offers=[offer])
    return msgspec.structs.replace(doc, models={**doc.models, "m1": model}, origin="api")


async def test_two_processes_starting_together_seed_once(redis_client: Redis) -> None:
    store = CatalogStore(redis_client)
    outcomes = await asyncio.gather(*(seed(store, FILE, VAULT) for _ in range(4)))
    assert sorted(outcomes) == ["kept", "kept", "kept", "seeded"]
    assert await store.version() == 1


async def test_every_watch_swaps_to_a_written_catalog(redis_url: str, redis_client: Redis) -> None:
    listen = [Redis.from_url(redis_url) for _ in range(3)]
    watches = [
        CatalogWatch(LiveCatalog(FILE), CatalogStore(redis_client), FILE, VAULT, {}, poll_s=60.0) for _ in listen
    ]
    try:
        for watch, client in zip(watches, listen):
            await watch.start(client)
        assert all(w.live.version == 1 and set(w.live.current.models) == {"m1"} for w in watches)
        held = watches[0].live.current
        await watches[0].store.update(lambda d: (with_model(d, "m2") if d else None, None))
        # poll_s is 60 s: only the message can bring the change this soon
        await eventually(lambda: all(set(w.live.current.models) == {"m1", "m2"} for w in watches))
        assert all(w.live.version == 2 for w in watches)
        assert set(held.models) == {"m1"}  # a request's snapshot is never edited in place
    finally:
        for watch, client in zip(watches, listen):
            await watch.stop()
            await client.aclose()


async def test_a_missed_message_is_caught_by_the_version_recheck(redis_url: str, redis_client: Redis) -> None:
    listen = Redis.from_url(redis_url)
    watch = CatalogWatch(LiveCatalog(FILE), CatalogStore(redis_client), FILE, VAULT, {}, poll_s=0.05)
    try:
        await watch.start(listen)
        doc, _version = await watch.store.load()
        assert doc is not None
        # a write whose message never came (written around the script: no publish)
        await redis_client.set(keys.CATALOG_DOC, doc_encoder.encode(with_model(doc, "m2")))
        await redis_client.incr(keys.CATALOG_VERSION)
        await eventually(lambda: "m2" in watch.live.current.models)
    finally:
        await watch.stop()
        await listen.aclose()


async def test_a_process_keeps_its_catalog_while_redis_is_away(redis_client: Redis) -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.1)
    watch = CatalogWatch(LiveCatalog(FILE), CatalogStore(dead), FILE, VAULT, {}, poll_s=0.05)
    try:
        await watch.start(dead, wait_s=0.2)
        assert set(watch.live.current.models) == {"m1"} and watch.live.version == 0
    finally:
        await watch.stop()
        await dead.aclose()
