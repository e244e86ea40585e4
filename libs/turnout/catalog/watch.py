"""Keeping a process's catalog in step with Redis (the shape of `turnout.directory`'s watch).

Owns: applying the bootstrap rule at start (`turnout.catalog.seed`), then a
subscription to the catalog channel that re-reads the catalog as soon as it
is written, and a re-check of the catalog version every `POLL_S` that
catches anything the subscription missed (pub/sub may drop a message, e.g.
across a reconnect); each new version is swapped in whole
(`turnout.catalog.live`). What a process wires to a swap (breakers, tenant
directory, scrubber) is wired where the process is composed (`turnout.runtime`).

Propagation bound: a catalog write is in force in every connected process
within `POLL_S` (0.5 s) + one Redis round trip, typically milliseconds
through pub/sub; documented as 2 s. While Redis is unreachable a process
keeps serving its last catalog.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from redis.asyncio import Redis

from turnout.catalog.doc import config_of
from turnout.catalog.key_check import refusal
from turnout.catalog.live import LiveCatalog
from turnout.catalog.seed import FROM_FILE_ENV, seed
from turnout.config import Config
from turnout.errors import ConfigError
from turnout.state import keys
from turnout.state.catalog_store import CatalogConflict, CatalogStore
from turnout.state.epoch import EpochTracker
from turnout.state.follow import follow, stop_task, wait_ready
from turnout.state.persistence import warn_unless_persistent
from turnout.state.switches import switch_on
from turnout.stored.catalog import CatalogDoc
from turnout.vault import Vault

log = logging.getLogger("turnout.catalog")

POLL_S = 0.5
"""Seconds between re-checks of the catalog version (the propagation bound's main term; bound: 2 s)."""


class CatalogWatch:
    """Reads the catalog from Redis into a `LiveCatalog`, now and on every change.

    Args:
        live: the process's catalog in force.
        store: the catalog store.
        file: this process's configuration file.
        vault: opens sealed provider keys (and seals the file's, when it seeds).
        env: the environment (`env` key references; `TURNOUT_CATALOG_FROM_FILE`).
        poll_s: seconds between version re-checks.
    """

    def __init__(
        self,
        live: LiveCatalog,
        store: CatalogStore,
        file: Config,
        vault: Vault,
        env: Mapping[str, str],
        *,
        poll_s: float = POLL_S,
    ) -> None:
        self.live = live
        self.store = store
        self.file = file
        self.vault = vault
        self._env = env
        self._poll_s = poll_s
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self.doc: CatalogDoc | None = None
        """The stored catalog in force (None until the first load)."""

    def config_of(self, doc: CatalogDoc) -> Config:
        """This process's configuration with `doc` as its catalog, validated as a file is.

        Raises:
            ConfigError: `doc` breaks a rule (the path named).
        """
        return config_of(doc, self.file, self._env, self.vault)

    async def refresh(self) -> bool:
        """Swap in the catalog in Redis when its version is not the one in force. True when swapped.

        Raises:
            StateUnavailable: Redis is unreachable.
        """
        if await self.store.version() == self.live.version:
            return False
        doc, version = await self.store.load()
        if doc is None or version == self.live.version:
            return False
        try:
            config = self.config_of(doc)
        except ConfigError as exc:  # validated where it was written; this process's own file disagrees
            log.warning(
                "catalog: version %d breaks a rule of %s (%s); serving it anyway", version, self.file.source, exc
            )
            config = config_of(doc, self.file, self._env, self.vault, check=False)
        self.live.swap(config, version)
        self.doc = doc
        log.info(
            "catalog: version %d in force (%d model(s), %d provider(s))", version, len(doc.models), len(doc.providers)
        )
        return True

    async def start(self, listen_redis: Redis, *, wait_s: float = 5.0) -> None:
        """Apply the bootstrap rule, start watching; wait up to `wait_s` for the first load.

        Until Redis answers, the process serves its file's catalog.

        Args:
            listen_redis: a client without a socket timeout (pub/sub).
        """
        self._ready = asyncio.Event()
        self._task = asyncio.create_task(self._watch(listen_redis), name="turnout-catalog-watch")
        if not await wait_ready(self._ready, wait_s):
            log.warning("catalog: Redis not reachable yet; serving the file's catalog until the first load")

    def start_refusal(self, service: str) -> str | None:
        """Why this process must not serve the catalog loaded at start (`turnout.catalog.key_check`), or None.

        None too when nothing was loaded yet (Redis did not answer in time: the
        process serves its file's catalog and is not refused later).
        """
        return None if self.doc is None else refusal(self.doc, self.vault, service=service)

    async def stop(self) -> None:
        """Stop watching."""
        await stop_task(self._task)

    async def _watch(self, listen_redis: Redis) -> None:
        async def first() -> None:
            await seed(
                self.store, self.file, self.vault, force=switch_on(self._env, FROM_FILE_ENV), check=self.config_of
            )

        async def persistence() -> None:
            await warn_unless_persistent(listen_redis)

        assert self._ready is not None
        await follow(
            listen_redis,
            keys.CATALOG_CHANNEL,
            refresh=self.refresh,
            ready=self._ready,
            poll_s=self._poll_s,
            what="catalog",
            first=first,
            retry_on=(CatalogConflict,),
            epoch=EpochTracker(),
            on_new_epoch=persistence,
        )
