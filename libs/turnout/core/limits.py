"""Limits per org, squad and key: the admission decision (SPEC §10 "Limits").

Owns: the `limits` setting's schema, the `max_tokens` / `n` ceiling check,
the token estimate of a request, and the pure decision whether one request
fits every limit that applies to it, over counters passed in and a time
passed in (integer milliseconds). `turnout.state.limit_store` runs the same
arithmetic in one Lua script against Redis; a contract test holds the two
to the same answers.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.

Rules:

- Every scope that sets a limit enforces it with its own counter: an org's
  `rpm` is shared by all of the org's keys, a squad's by the squad's keys,
  a key's by that key alone. A request is admitted only when it fits all of
  them, and then counts against all of them; a refused request counts
  against none.
- `rpm` and `tpm` are GCRA buckets (a leaky bucket as a meter) over a
  60 000 ms window: a full window's allowance may be spent at once, after
  which it refills continuously at `limit` per minute. Over any span of
  `d` ms a scope admits at most `limit + limit · d / 60 000` units.
  The bucket is kept as a *level* in unit·ms (each unit adds 60 000, the
  level drains by `limit` per ms, capacity `limit · 60 000`), so every
  quantity is an integer below 2⁵³ and Lua's doubles compute it exactly.
- `tpm` is charged the estimate at admission and then settled to the usage
  the answer reports (`turnout.core.reserve.charged`): the level may stand
  above the capacity, a debt that later requests wait out.
- `max_concurrent` counts requests in flight (streams included),
  `max_streams` streams in flight; each is a lease that expires unless
  renewed, so a lease whose ingress died frees its slot by itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Literal

import msgspec

WINDOW_MS = 60_000
"""The window of `rpm` and `tpm`: one minute, in ms."""

LIMIT_MAX = 1_000_000_000
"""Largest value any limit may take (keeps `limit · WINDOW_MS` below 2⁵³)."""

MAX_REQUEST_TOKENS = 2**31 - 1
"""The largest `max_tokens` a request may ask, on either route (token counts are int32 upstream)."""

Positive = Annotated[int, msgspec.Meta(ge=1, le=LIMIT_MAX)]

ScopeKind = Literal["org", "squad", "key"]
LimitName = Literal["rpm", "tpm", "max_concurrent", "max_streams"]

CONCURRENCY_RETRY_MS = 1_000
"""`Retry-After` of a refusal by `max_concurrent` / `max_streams`: a slot frees
when any request of the scope ends, which no counter can foretell."""


class Limits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The `limits` setting of one scope; a field left out is no limit at that scope.

    Attributes:
        rpm: requests per minute.
        tpm: estimated tokens per minute (`estimate_tokens`).
        max_concurrent: requests in flight at once, streams included.
        max_streams: streaming requests in flight at once.
        max_tokens: ceiling of a request's `max_tokens` / `max_completion_tokens`.
        max_n: ceiling of a request's `n`.
    """

    rpm: Positive | None = None
    tpm: Positive | None = None
    max_concurrent: Positive | None = None
    max_streams: Positive | None = None
    max_tokens: Positive | None = None
    max_n: Positive | None = None


class ScopeLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits one scope puts on a key's requests.

    Attributes:
        kind: `org`, `squad` or `key`.
        org: the org id.
        id: the squad's or key's name; None for the org itself.
        limits: the scope's `limits` setting.
    """

    kind: ScopeKind
    org: str
    id: str | None = None
    limits: Limits

    @property
    def label(self) -> str:
        """The scope as messages name it: `org acme`, `squad acme/research`, `key acme/ci-bot`."""
        return f"{self.kind} {self.org}" + (f"/{self.id}" if self.id is not None else "")


class Bucket(msgspec.Struct, frozen=True, kw_only=True):
    """A GCRA bucket's stored state: `level` (unit·ms) at `at_ms`."""

    level: int = 0
    at_ms: int = 0


class Counters(msgspec.Struct, frozen=True, kw_only=True):
    """One scope's counters.

    Attributes:
        rpm / tpm: the buckets (an absent bucket is an empty one).
        leases / stream_leases: expiry (epoch ms) of each request / stream in flight.
    """

    rpm: Bucket = Bucket()
    tpm: Bucket = Bucket()
    leases: tuple[int, ...] = ()
    stream_leases: tuple[int, ...] = ()


class Demand(msgspec.Struct, frozen=True, kw_only=True):
    """What one request asks of the limits.

    Attributes:
        tokens: estimated tokens (`estimate_tokens`), ≥ 0.
        stream: a streaming request (also holds a `max_streams` slot).
        lease_ms: how long its concurrency slots live unless renewed.
    """

    tokens: int
    stream: bool
    lease_ms: int


class Quota(msgspec.Struct, frozen=True, kw_only=True):
    """The tightest `rpm` or `tpm` scope after a decision (OpenAI's `x-ratelimit-*` headers).

    Attributes:
        limit: the scope's limit per minute.
        remaining: whole units that would still be admitted now.
        reset_ms: ms until the bucket is empty again (the allowance fully back).
    """

    limit: int
    remaining: int
    reset_ms: int


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """Why a request was refused.

    Attributes:
        limit: the limit that refused it (of those that did, the longest wait).
        scope: index into the scopes given to `decide`.
        retry_after_ms: ms until it would fit, if nothing else happened;
            None when it never can (more tokens than the `tpm` limit).
    """

    limit: LimitName
    scope: int
    retry_after_ms: int | None


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """Admitted or refused, and the quotas to report.

    Attributes:
        refusal: None when admitted.
        requests / tokens: the tightest `rpm` / `tpm` quota, None if no scope sets one.
    """

    refusal: Refusal | None
    requests: Quota | None
    tokens: Quota | None

    @property
    def admitted(self) -> bool:
        """True when the request fits every limit."""
        return self.refusal is None


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of `decide`: the verdict and the counters after it (unchanged when refused)."""

    verdict: Verdict
    counters: tuple[Counters, ...]


class CeilingExceeded(msgspec.Struct, frozen=True, kw_only=True):
    """A request field above a scope's ceiling (answered 400, never clamped).

    Attributes:
        field: the request field (`max_tokens`, `max_completion_tokens`, `n`).
        value: what the request asked for.
        ceiling: the lowest ceiling in force.
        scope: the scope that set it (`ScopeLimits.label`).
    """

    field: str
    value: int
    ceiling: int
    scope: str


def drained(bucket: Bucket, limit: int, now_ms: int) -> int:
    """The bucket's level at `now_ms` (unit·ms, ≥ 0): it drains `limit` per ms (a level above
    the capacity, a `tpm` debt left by usage, `turnout.core.reserve.charged`, drains the same way)."""
    elapsed_ms = now_ms - bucket.at_ms
    if elapsed_ms <= 0:
        return bucket.level
    return max(0, bucket.level - elapsed_ms * limit)


def quota(level: int, limit: int) -> Quota:
    """Remaining whole units and ms to empty at `level` (unit·ms)."""
    return Quota(
        limit=limit,
        remaining=(limit * WINDOW_MS - level) // WINDOW_MS,
        reset_ms=-(-level // limit),
    )


def estimate_tokens(body_bytes: int, completion_tokens: int | None, n: int) -> int:
    """The tokens `tpm` charges a request at admission; settled to the answer's usage once it
    has been answered (`turnout.core.reserve.charged`).

    The prompt is estimated as a quarter of the request body's bytes,
    rounded up (about 4 bytes per token for English text and JSON); the
    completion as `completion_tokens × n`.

    Args:
        body_bytes: size of the request body.
        completion_tokens: the request's `max_tokens` (or
            `max_completion_tokens`); when it sends none, the lowest
            `max_tokens` ceiling in force, else None (the completion is not
            counted).
        n: choices asked for (≥ 1).
    """
    return -(-body_bytes // 4) + (completion_tokens or 0) * n


def lowest(scopes: Sequence[ScopeLimits], field: Literal["max_tokens", "max_n"]) -> tuple[int, str] | None:
    """The lowest ceiling `field` any scope sets, with the scope's name; None if none does."""
    found = [(getattr(s.limits, field), s.label) for s in scopes if getattr(s.limits, field) is not None]
    return min(found, key=lambda pair: pair[0]) if found else None


def check_ceilings(scopes: Sequence[ScopeLimits], requested: dict[str, int]) -> CeilingExceeded | None:
    """The first request field above the lowest ceiling in force, or None.

    Args:
        scopes: the limits that apply to the key.
        requested: the request's `max_tokens`, `max_completion_tokens` and
            `n`, those it sends.

    Choice (SPEC §10 leaves clamp or refuse open): refuse. A clamped
    `max_tokens` would end answers early without the client knowing why,
    and a clamped `n` would return fewer choices than asked for.
    """
    fields: tuple[tuple[str, Literal["max_tokens", "max_n"]], ...] = (
        ("max_tokens", "max_tokens"),
        ("max_completion_tokens", "max_tokens"),
        ("n", "max_n"),
    )
    for field, ceiling_field in fields:
        value = requested.get(field)
        bound = lowest(scopes, ceiling_field)
        if value is not None and bound is not None and value > bound[0]:
            return CeilingExceeded(field=field, value=value, ceiling=bound[0], scope=bound[1])
    return None


def decide(
    scopes: Sequence[ScopeLimits],
    counters: Sequence[Counters],
    demand: Demand,
    now_ms: int,
) -> Decision:
    """Admit a request only if it fits every limit of every scope (atomically: all or none).

    Args:
        scopes: the limits that apply, in order org, squad, key.
        counters: each scope's counters, same order and length.
        demand: what the request asks.
        now_ms: the current time, epoch ms (Redis `TIME` in the fleet).

    Returns:
        The decision. When admitted, every bucket has its cost added and
        the request holds a lease (and a stream lease) in every scope that
        limits concurrency; expired leases are dropped either way.
        Checked per scope: `max_concurrent`, `max_streams`, `rpm`, `tpm`;
        a refusal names the limit with the longest wait (a `tpm` the
        request can never fit beats every wait).
    """
    refusal: Refusal | None = None
    seen: dict[LimitName, list[tuple[Quota, Quota]]] = {"rpm": [], "tpm": []}  # (before, if admitted)
    after: list[Counters] = []
    for index, (scope, held) in enumerate(zip(scopes, counters, strict=True)):
        limits = scope.limits
        leases = tuple(e for e in held.leases if e > now_ms)
        stream_leases = tuple(e for e in held.stream_leases if e > now_ms)
        waits: list[tuple[LimitName, int | None]] = []
        if limits.max_concurrent is not None and len(leases) >= limits.max_concurrent:
            waits.append(("max_concurrent", CONCURRENCY_RETRY_MS))
        if demand.stream and limits.max_streams is not None and len(stream_leases) >= limits.max_streams:
            waits.append(("max_streams", CONCURRENCY_RETRY_MS))
        buckets: dict[LimitName, Bucket] = {"rpm": held.rpm, "tpm": held.tpm}
        meters: tuple[tuple[LimitName, int | None, int], ...] = (
            ("rpm", limits.rpm, 1),
            ("tpm", limits.tpm, demand.tokens),
        )
        for name, limit, cost in meters:
            if limit is None:
                continue
            level = drained(buckets[name], limit, now_ms)
            capacity = limit * WINDOW_MS
            new_level = level + cost * WINDOW_MS
            if cost > limit:
                waits.append((name, None))
                new_level = level
            elif new_level > capacity:
                waits.append((name, -(-(new_level - capacity) // limit)))
                new_level = level
            else:
                buckets[name] = Bucket(level=new_level, at_ms=now_ms)
            seen[name].append((quota(level, limit), quota(new_level, limit)))
        for limit_name, wait_ms in waits:
            if refusal is None or _longer(wait_ms, refusal.retry_after_ms):
                refusal = Refusal(limit=limit_name, scope=index, retry_after_ms=wait_ms)
        lease_expiry = now_ms + demand.lease_ms
        after.append(
            Counters(
                rpm=buckets["rpm"],
                tpm=buckets["tpm"],
                leases=(*leases, lease_expiry) if limits.max_concurrent is not None else leases,
                stream_leases=(*stream_leases, lease_expiry)
                if demand.stream and limits.max_streams is not None
                else stream_leases,
            )
        )
    pick = 0 if refusal is not None else 1
    verdict = Verdict(
        refusal=refusal,
        requests=tightest([pair[pick] for pair in seen["rpm"]]),
        tokens=tightest([pair[pick] for pair in seen["tpm"]]),
    )
    return Decision(verdict=verdict, counters=tuple(counters) if refusal is not None else tuple(after))


def tightest(quotas: Sequence[Quota]) -> Quota | None:
    """The quota with the fewest units remaining (ties: the later reset; then the first given)."""
    best: Quota | None = None
    for candidate in quotas:
        if best is None or (candidate.remaining, -candidate.reset_ms) < (best.remaining, -best.reset_ms):
            best = candidate
    return best


def _longer(wait_ms: int | None, than_ms: int | None) -> bool:
    """True when `wait_ms` is a longer wait than `than_ms` (None = never fits: the longest)."""
    if than_ms is None:
        return False
    return wait_ms is None or wait_ms > than_ms


def is_limited(scopes: Sequence[ScopeLimits]) -> bool:
    """True when any scope sets a counted limit (`rpm`, `tpm`, `max_concurrent`, `max_streams`)."""
    return any(s.limits.rpm or s.limits.tpm or s.limits.max_concurrent or s.limits.max_streams for s in scopes)


def header_duration(ms: int) -> str:
    """A duration as OpenAI writes `x-ratelimit-reset-*`: `350ms`, `6s`, `1m30s`, `1h2m0s`.

    Rounded up to whole seconds above one second, so a client never retries early.
    """
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    s = math.ceil(ms / 1000)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"
