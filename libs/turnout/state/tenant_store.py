"""The tenancy store in Redis: org documents, the config version, invalidation.

Owns: reading and writing `turnout.stored.orgs.OrgDoc` documents with optimistic
concurrency (compare-and-set on the org's version, one Lua script), the
fleet-wide version counter, and the invalidation message every write
publishes. Key names are in `turnout.state.keys`.
Must not import: services, FastAPI, arq, httpx.

Data model (Redis must run with AOF on: this is the system of record for
run-time tenancy edits; see README "Tenancy and keys"):

    turnout:tenancy:version       INCR per write (the config version)
    turnout:tenancy:orgs          hash org -> version of its last write
    turnout:tenancy:org:<org>     JSON OrgDoc (settings, squads, keys, BYOK, endpoints)
    turnout:tenancy:deleted       set of orgs deleted through the API
    turnout:tenancy:changed       pub/sub: org id, published by every write

A write is atomic: the document, the org's version, the counter and the
message change together or not at all, so a reader never sees half an edit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import maps_state_errors
from turnout.stored.orgs import OrgDoc, doc_decoder, doc_encoder

T = TypeVar("T")

# KEYS: doc, orgs hash, version counter, deleted set
# ARGV: org, expected version ("0" = must not exist), doc JSON ("" = delete), channel,
#       tombstone a deletion ("1") or not ("0")
_WRITE = """
local current = redis.call('hget', KEYS[2], ARGV[1]) or '0'
if current ~= ARGV[2] then return -1 end
local v = redis.call('incr', KEYS[3])
if ARGV[3] == '' then
  redis.call('del', KEYS[1])
  redis.call('hdel', KEYS[2], ARGV[1])
  if ARGV[5] == '1' then redis.call('sadd', KEYS[4], ARGV[1]) end
else
  redis.call('set', KEYS[1], ARGV[3])
  redis.call('hset', KEYS[2], ARGV[1], v)
  redis.call('srem', KEYS[4], ARGV[1])
end
redis.call('publish', ARGV[4], ARGV[1])
return v
"""

CAS_ATTEMPTS = 16


class WriteConflict(RuntimeError):
    """The org changed between read and write more times than `CAS_ATTEMPTS`."""


@maps_state_errors
class TenantStore:
    """Org documents in Redis.

    Args:
        redis: a client (decode_responses off).
    """

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._write = redis.register_script(_WRITE)

    async def version(self) -> int:
        """The fleet-wide config version (0 before any write)."""
        return await read_counter(self._redis, keys.TENANCY_VERSION)

    async def org_versions(self) -> dict[str, int]:
        """Every org id with the version of its last write."""
        raw: dict[Any, Any] = await self._redis.hgetall(keys.TENANCY_ORGS)  # type: ignore[misc]
        return {_text(k): int(v) for k, v in raw.items()}

    async def deleted(self, org: str) -> bool:
        """True when `org` was deleted through the admin API."""
        return bool(await self._redis.sismember(keys.TENANCY_DELETED, org))  # type: ignore[misc]

    async def load(self, org: str) -> tuple[OrgDoc | None, int]:
        """The org's document and version ((None, 0) when absent)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(keys.tenancy_org_key(org))
            pipe.hget(keys.TENANCY_ORGS, org)
            raw, version = await pipe.execute()
        if raw is None or version is None:
            return None, 0
        return doc_decoder.decode(raw), int(version)

    async def load_many(self, orgs: list[str]) -> dict[str, tuple[OrgDoc, int]]:
        """Documents and versions of `orgs` (absent ones left out), in one round trip."""
        if not orgs:
            return {}
        async with self._redis.pipeline(transaction=True) as pipe:
            for org in orgs:
                pipe.get(keys.tenancy_org_key(org))
                pipe.hget(keys.TENANCY_ORGS, org)
            replies = await pipe.execute()
        out: dict[str, tuple[OrgDoc, int]] = {}
        for i, org in enumerate(orgs):
            raw, version = replies[2 * i], replies[2 * i + 1]
            if raw is not None and version is not None:
                out[org] = (doc_decoder.decode(raw), int(version))
        return out

    async def write(
        self,
        doc: OrgDoc | None,
        org: str,
        expected_version: int,
        *,
        tombstone: bool = True,
    ) -> int | None:
        """Compare-and-set: store `doc` (None deletes) if the org is still at `expected_version`.

        Args:
            tombstone: a deletion is remembered, so the configuration file
                never re-creates the org (an admin API delete); False removes
                it as if it had never been (the file may create it again).

        Returns:
            The new config version, or None when the org changed meanwhile.
        """
        payload = b"" if doc is None else doc_encoder.encode(doc)
        result = await self._write(
            keys=[keys.tenancy_org_key(org), keys.TENANCY_ORGS, keys.TENANCY_VERSION, keys.TENANCY_DELETED],
            args=[org, str(expected_version), payload, keys.TENANCY_CHANNEL, "1" if tombstone else "0"],
        )
        return None if int(result) < 0 else int(result)

    async def update(
        self,
        org: str,
        mutate: Callable[[OrgDoc | None], tuple[OrgDoc | None, T]],
        *,
        delete: bool = False,
    ) -> tuple[OrgDoc | None, T, int | None]:
        """Read, mutate, write with compare-and-set, retrying on a concurrent write.

        Args:
            org: the org id.
            mutate: given the current document (None when absent), returns
                (the new document, a result for the caller); returning the
                same object writes nothing. It may raise to refuse the write
                (nothing is written); it may run more than once.
            delete: write a deletion instead (the document returned is ignored).

        Returns:
            (the document in force, mutate's result, the new config version
            or None when nothing was written).

        Raises:
            WriteConflict: still conflicting after `CAS_ATTEMPTS` tries.
        """
        for _ in range(CAS_ATTEMPTS):
            current, version = await self.load(org)
            new, result = mutate(current)
            if new is current and not delete:
                return current, result, None
            written = await self.write(None if delete else new, org, version)
            if written is not None:
                return (None if delete else new), result, written
        raise WriteConflict(f"org {org!r} kept changing during the write; retry")


async def read_counter(redis: Redis, key: str) -> int:
    """A version counter's value (0 when never written)."""
    raw = await redis.get(key)
    return int(raw) if raw else 0


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
