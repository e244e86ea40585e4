"""What an org leaves in Redis besides its document, removed when the org is deleted.

Owns: `purge_org_state`. An org deleted through the admin API may be
created again under the same id; the new org must start clean, not inherit
its predecessor's spend (a hard budget would start partly spent), its
limit counters, its `Idempotency-Key` bindings (a retry could be answered
with the old org's stored result), its stored Responses (a new key of the
same name could read them), or its door-refusal stream (`keys.refusals_key`:
the new org's admin would read its predecessor's refusals). Attempt records are not here: they live
in the fleet's one capped stream, and an org's exports read only rows since
its `created_s` (`turnout_ingress.admin.records`).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.errors import state_errors

LIMIT_KINDS = ("org", "squad", "key")
"""The scopes a limit counter is kept for (`turnout.core.limits.ScopeLimits.kind`)."""

_GLOB = re.compile(r"([*?\[\]\\])")


def _literal(text: str) -> str:
    """`text` with Redis's glob characters escaped, for a `SCAN MATCH` pattern."""
    return _GLOB.sub(r"\\\1", text)


def org_state_patterns(org: str) -> list[str]:
    """The `SCAN MATCH` patterns of every key `org` leaves besides its document (spend ledgers, limit
    counters, Idempotency-Key bindings, stored Responses and their index, the door-refusal stream), each matching only
    that org's keys (the id is escaped)."""
    limits = [keys.LIMIT_PREFIX + f"{kind}:{_literal(quote(org, safe=''))}:*" for kind in LIMIT_KINDS]
    responses = [f"{keys.RESPONSE_PREFIX}{_literal(quote(org, safe=''))}:*", _literal(keys.response_index_key(org))]
    own = [f"{keys.SPEND_PREFIX}{_literal(org)}:*", f"{keys.IDEMPOTENCY_PREFIX}{_literal(org)}:*"]
    return [*own, *limits, *responses, _literal(keys.refusals_key(org))]


async def purge_org_state(redis: Redis, org: str, *, batch: int = 500) -> int:
    """Delete every key of `org_state_patterns(org)`; returns how many were deleted.

    SCAN walks the keyspace in steps of `batch` (no blocking `KEYS`); an admin
    deletion is rare, so the walk's cost is paid then, never on a request.

    Raises:
        StateUnavailable: Redis unreachable (what was deleted before stays deleted).
    """
    deleted = 0
    with state_errors():
        for pattern in org_state_patterns(org):
            found: list[str] = []
            async for key in redis.scan_iter(match=pattern, count=batch):
                found.append(key)
                if len(found) >= batch:
                    deleted += int(await redis.unlink(*found))
                    found = []
            if found:
                deleted += int(await redis.unlink(*found))
    return deleted
