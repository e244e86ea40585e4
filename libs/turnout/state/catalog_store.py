"""The catalog store in Redis: one versioned document, written atomically.

Owns: reading and writing `turnout.stored.catalog.CatalogDoc` with optimistic
concurrency (compare-and-set on the catalog version, one Lua script), the
digests of the configuration files already applied, and the message every
write publishes. Key names are in `turnout.state.keys`.
Must not import: services, FastAPI, arq, httpx.

Data model (Redis must run with AOF on: admin edits live only here):

    turnout:catalog:version   INCR per write (0 = never written)
    turnout:catalog:doc       JSON CatalogDoc (models, offers, providers, key references)
    turnout:catalog:files     set of applied file digests
    turnout:catalog:owned     JSON: the entries the configuration file wrote (`turnout.catalog.ownership`)
    turnout:catalog:changed   pub/sub: the new version, published by every write

A write changes the document, the version, the digest set and publishes
together or not at all (one script), so a reader never sees half an edit and
two concurrent edits never lose one another (the second one's compare-and-set
fails and it re-reads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors
from turnout.state.tenant_store import CAS_ATTEMPTS, read_counter
from turnout.stored.catalog import CatalogDoc, Owned, doc_decoder, doc_encoder, owned_decoder

T = TypeVar("T")

# KEYS: doc, version counter, applied file digests, ownership record
# ARGV: expected version, doc JSON, channel, file digest to remember ("" = none), record JSON ("" = unchanged)
_WRITE = """
local current = redis.call('get', KEYS[2]) or '0'
if current ~= ARGV[1] then return -1 end
local v = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[2])
if ARGV[4] ~= '' then redis.call('sadd', KEYS[3], ARGV[4]) end
if ARGV[5] ~= '' then redis.call('set', KEYS[4], ARGV[5]) end
redis.call('publish', ARGV[3], v)
return v
"""


class CatalogConflict(RuntimeError):
    """The catalog changed between read and write more than `CAS_ATTEMPTS` times."""


@maps_state_errors
class CatalogStore:
    """The catalog document in Redis (`redis`: a client, decode_responses off)."""

    def __init__(self, redis: Redis) -> None:
        self._write = redis.register_script(_WRITE)
        self._redis = redis

    async def version(self) -> int:
        """The catalog version (0 before the first write)."""
        return await read_counter(self._redis, keys.CATALOG_VERSION)

    async def load(self) -> tuple[CatalogDoc | None, int]:
        """The document and its version, read together ((None, 0) before the first write)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(keys.CATALOG_DOC)
            pipe.get(keys.CATALOG_VERSION)
            raw, version = await pipe.execute()
        if raw is None or version is None:
            return None, 0
        return doc_decoder.decode(raw), int(version)

    async def owned(self) -> dict[str, Owned] | None:
        """The ownership record: the entries the configuration file wrote (None: never recorded)."""
        raw = await self._redis.get(keys.CATALOG_OWNED)
        return None if raw is None else owned_decoder.decode(raw)

    async def applied(self, digest: str) -> bool:
        """True when a file with this digest was applied before (a stale file)."""
        return bool(await self._redis.sismember(keys.CATALOG_FILES, digest))  # type: ignore[misc]

    async def write(
        self,
        doc: CatalogDoc,
        expected_version: int,
        *,
        remember_file: str = "",
        owned: dict[str, Owned] | None = None,
    ) -> int | None:
        """Compare-and-set: store `doc` if the catalog is still at `expected_version` (0 = never written).

        Args:
            remember_file: a file digest to add to the applied set in the same write.
            owned: the new ownership record, written in the same write (None: left as it is).

        Returns:
            The new version, or None when the catalog changed meanwhile.
        """
        result = await self._write(
            keys=[keys.CATALOG_DOC, keys.CATALOG_VERSION, keys.CATALOG_FILES, keys.CATALOG_OWNED],
            args=[
                str(expected_version),
                doc_encoder.encode(doc),
                keys.CATALOG_CHANNEL,
                remember_file,
                b"" if owned is None else doc_encoder.encode(owned),
            ],
        )
        return None if int(result) < 0 else int(result)

    async def update(
        self,
        mutate: Callable[[CatalogDoc | None], tuple[CatalogDoc | None, T]],
    ) -> tuple[CatalogDoc | None, T, int | None]:
        """Read, mutate, write with compare-and-set, retrying on a concurrent write.

        Args:
            mutate: given the current document (None before the first write),
                returns (the new document, a result for the caller); returning
                the same object (or None) writes nothing. It may raise to refuse
                the write (nothing is written); it may run more than once.

        Returns:
            (the document in force, mutate's result, the new version or None
            when nothing was written).

        Raises:
            CatalogConflict: still conflicting after `CAS_ATTEMPTS` tries.
        """
        for _ in range(CAS_ATTEMPTS):
            current, version = await self.load()
            new, result = mutate(current)
            if new is None or new is current:
                return current, result, None
            written = await self.write(new, version)
            if written is not None:
                return new, result, written
        raise CatalogConflict("the catalog kept changing during the write; retry")
