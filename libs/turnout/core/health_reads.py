"""What one read of the fleet's health returns: each target's breaker snapshot with its version,
and its rolling measures (SPEC §5, §10).

Owns: the documents a `turnout.state.breaker_store.BreakerStore` read returns and a job carries
to its worker (`turnout.wire.JobPayload.health`), so the wire format reads them from the pure
core, not from the Redis edge that fills them.
Must not import: anything but msgspec and `turnout.core`.
"""

from __future__ import annotations

import msgspec

from turnout.core.breaker import BreakerSnapshot


class Versioned(msgspec.Struct, frozen=True):
    """A snapshot with the version it was read at (0 = never written)."""

    version: int
    snapshot: BreakerSnapshot


class Speed(msgspec.Struct, frozen=True, kw_only=True):
    """The fleet's rolling measures of one target (SPEC §10 `latency`, `throughput`).

    Attributes:
        ttft_ms: latency in milliseconds (time to first token of a stream,
            the whole answer of a JSON call), or None when unmeasured.
        tokens_per_s: completion tokens per second of an attempt, or None.
    """

    ttft_ms: float | None = None
    tokens_per_s: float | None = None


class Loaded(msgspec.Struct, frozen=True):
    """Snapshots read together, with the store's clock at the read (epoch seconds),
    and the measures of those subjects that have any."""

    now_s: float
    entries: dict[str, Versioned]
    speeds: dict[str, Speed] = {}
    caps: dict[str, float] = {}
