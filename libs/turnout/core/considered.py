"""Considered offers: the plan's offers a request did not attempt, and why (issue #45 item 6:
a request's detail names the provider that served it and every other offer its plan held).

Owns: the reasons (`Why`), one left-out offer (`Considered`), and the list as of one attempt's
end (`considered_so_far`): the offers the plan builder left out (`Plan.left_out`: past
`plan.max_offers`, filtered by the request's `provider` preferences, no credential under the
key mode), then the plan's own targets not attempted yet: skipped by the loop (open, resting,
slow start, no credential, the tenant's key failing, a usage cap, an API that cannot express
the request: `turnout.core.loop.SkipReason`), else not reached (the loop served or stopped
before them). Each ended attempt record carries the list as of its end; the request's last
record carries the request's.
Must not import: anything outside the standard library, msgspec and `turnout.core` (but `loop`,
which imports this module).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import msgspec

from turnout.core.types import Target


class Why(enum.StrEnum):
    """Why an offer of the plan was not attempted. The values of `turnout.core.loop.SkipReason`
    stand as they are beside these."""

    CAPPED = "capped"  # past `plan.max_offers`
    ONE_PER_MODEL = "one_per_model"  # a model's offer after its first, without `fallback.cross_provider_same_model`
    PREFERENCES = "preferences"  # the request's `provider` preferences left it out
    NO_CREDENTIAL = "no_credential"  # no key the key mode allows (SPEC §6)
    NOT_REACHED = "not_reached"  # in the plan; the loop served or stopped before it


class Considered(msgspec.Struct, frozen=True, kw_only=True):
    """One offer the request did not attempt.

    Attributes:
        provider / model: the offer (`Target.provider`, `Target.model`).
        catalog_model: the catalog model it serves.
        reason: a `Why` value or a `SkipReason` value (`circuit_open`, `resting`, `ramping`,
            `no_credential`, `credential_open`, `plan_capped`, `unsupported`).
        reopen_in_s: for an offer out of rotation, seconds until it may be attempted again
            (as of the skip), else None.
    """

    provider: str
    model: str
    catalog_model: str
    reason: str
    reopen_in_s: float | None = None

    @property
    def key(self) -> str:
        """`provider/model`."""
        return f"{self.provider}/{self.model}"


def left_out(target: Target, why: Why) -> Considered:
    """A `Considered` for an offer the plan builder left out."""
    return Considered(provider=target.provider, model=target.model, catalog_model=target.catalog_model, reason=why)


def considered_so_far(
    left: Sequence[Considered],
    entries: Iterable[Target],
    attempted: Iterable[Target],
    skipped: Iterable[tuple[Target, str, float | None]],
) -> tuple[Considered, ...]:
    """The offers not attempted so far, each once, in plan order then the plan builder's.

    Args:
        left: `Plan.left_out`.
        entries: the targets the loop walks (`LoopState.sequence`, the plan's or a special list).
        attempted: targets attempted so far (any cycle).
        skipped: `(target, reason, reopen_in_s)` of every skip so far, oldest first (the
            newest skip of a target gives its reason).

    Returns:
        The walked targets not attempted, with their newest skip's reason, else
        `not_reached`; then `left` (offers never in the plan), all without duplicates.
    """
    tried = {t.key for t in attempted}
    last_skip = {t.key: (reason, reopen) for t, reason, reopen in skipped}
    out: dict[str, Considered] = {}
    for t in entries:
        if t.key in tried or t.key in out:
            continue
        reason, reopen = last_skip.get(t.key, (Why.NOT_REACHED, None))
        out[t.key] = Considered(
            provider=t.provider, model=t.model, catalog_model=t.catalog_model, reason=str(reason), reopen_in_s=reopen
        )
    for c in left:
        if c.key not in tried and c.key not in out:
            out[c.key] = c
    return tuple(out.values())
