"""Policy: the retry / fallback / budget settings that govern the attempt loop.

Owns: the policy data shape and defaults of SPEC §4, the operator ceilings,
clamping (which reports what it clamped), the typed partial policy
(`PolicyOverrides`: every field UNSET unless a layer sets it) and merging
it over a lower layer (layered settings: omitted fields keep the lower
layer's value).
Must not import: anything outside the standard library, msgspec and
`turnout.core`.

Durations follow the SPEC's policy JSON: milliseconds, with `_ms` in every
name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

_STATUS_WORDS = 'an HTTP status from 100 to 599 (429, also "429") or a class (5xx)'
StatusEntry = (
    Annotated[int, msgspec.Meta(ge=100, le=599, description=_STATUS_WORDS)]
    | Annotated[
        str,
        msgspec.Meta(pattern=r"^ *([1-5][0-9][0-9]|[1-5][xX][xX]) *$", max_length=16, description=_STATUS_WORDS),
    ]
)
"""One entry of a status list: an HTTP status (429, also "429") or a class ("5xx");
anything else is refused where a policy is decoded (file, admin API), naming the entry."""


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Same-target retries (SPEC §4 `retry`).

    Attributes:
        max_retries: retries of the primary target (attempts there = 1 + this).
        retry_on_status: statuses (or "5xx"-style classes) that may be retried.
        base_ms: full-jitter base delay, clamped to 250–60 000 ms; 0 means no backoff at all
            (retries follow at once: `NO_BACKOFF`).
        max_ms: cap of one computed delay; a provider hint above it means
            "do not wait, fall back now".
        respect_retry_after: let a provider's Retry-After replace the delay.
        per_attempt_timeout_ms: timeout of one attempt (also capped by the
            time left in the budget).
        fallback_target_retries: retries of each fallback target.
        ttft_timeout_ms: streaming first-token timeout; 0 = only the attempt
            timeout applies.
        stall_timeout_ms: streaming gap between chunks that ends a stream;
            0 = no stall watchdog.
        stall_retries: re-sends to the same target of a stream that sent nothing before its
            first-token timeout (`ttft_timeout_ms`), opt-in (seed 003, `maxStallRetries`);
            0 = a stalled stream falls over at once, as every timeout does (SPEC §3). Bounded
            by the operator's `max_retries` ceiling; the attempt budget and deadline still apply.
        stream_recovery: what a committed stream does when it breaks:
            `none` ends it with an error event; `continue` asks the same
            target, then the plan's other targets that accept an assistant
            prefill, to continue the text already delivered, and streams only
            the new text.
    """

    max_retries: int = 1
    retry_on_status: tuple[StatusEntry, ...] = (429, 500, 502, 503, 529)
    base_ms: int = 250
    max_ms: int = 8000
    respect_retry_after: bool = True
    per_attempt_timeout_ms: int = 120_000
    fallback_target_retries: int = 0
    ttft_timeout_ms: int = 0
    stall_timeout_ms: int = 0
    stall_retries: int = 0
    stream_recovery: Literal["none", "continue"] = "none"

    @property
    def per_attempt_timeout_s(self) -> float:
        """`per_attempt_timeout_ms` in seconds."""
        return self.per_attempt_timeout_ms / 1000

    @property
    def ttft_timeout_s(self) -> float | None:
        """`ttft_timeout_ms` in seconds; None when 0 (only the attempt timeout applies)."""
        return self.ttft_timeout_ms / 1000 if self.ttft_timeout_ms else None

    @property
    def stall_timeout_s(self) -> float | None:
        """`stall_timeout_ms` in seconds; None when 0 (no stall watchdog)."""
        return self.stall_timeout_ms / 1000 if self.stall_timeout_ms else None


OnExhausted = Literal["gateway", "last", "original"]
"""`fallback.on_exhausted` (`turnout.core.exhausted`); anything else is refused where decoded."""


class FallbackPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Moving to another target after a failure (SPEC §4 `fallback`).

    Attributes:
        enabled: when False the loop never leaves the first target's model.
        cross_provider_same_model: expand a model into all its offers.
        models: gateway-wide model fallbacks (appended after configured maps). It adds models,
            as it always has; `only` is what constrains them.
        comparable: after the configured fallback models, append the other models of the
            requested model's catalog `class` (comparable alternates, `turnout.core.alternates`);
            off by default. Never for a pinned `provider/model`, an embedding model, or under a
            firing spend strategy.
        only: when not empty, the only models the plan's model fallbacks may use (the scope's
            `fallbacks`, `models` and comparable alternates); the requested model and its
            reroutes are not constrained. Empty (default): no constraint.
        backoff_ms: pause before each fallback attempt.
        on_status: statuses (or classes) that allow a fallback.
        max_cycles: passes over the whole plan (1 = no restart).
        credential_fallback: under `key_mode: own_then_shared`, a tenant key
            rejected with 401/403 is retried once on the shared key for the
            same target (SPEC §6).
        on_exhausted: the answer when every attempt failed: `gateway` (SPEC §7's 502
            `provider_failed`), `last` (the last attempt's upstream status and error)
            or `original` (the first attempt's); see `turnout.core.exhausted`.
    """

    enabled: bool = True
    cross_provider_same_model: bool = True
    models: tuple[str, ...] = ()
    comparable: bool = False
    only: tuple[str, ...] = ()
    backoff_ms: int = 0
    on_status: tuple[StatusEntry, ...] = (408, 429, "5xx")
    max_cycles: int = 1
    credential_fallback: bool = True
    on_exhausted: OnExhausted = "gateway"

    @property
    def backoff_s(self) -> float:
        """`backoff_ms` in seconds."""
        return self.backoff_ms / 1000


class BudgetPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Limits of one request (SPEC §4 `budget`).

    Attributes:
        max_attempts: attempts in total, over every target and cycle.
        max_total_latency_ms: wall-clock deadline from arrival at the ingress.
    """

    max_attempts: int = 6
    max_total_latency_ms: int = 180_000

    @property
    def max_total_latency_s(self) -> float:
        """`max_total_latency_ms` in seconds."""
        return self.max_total_latency_ms / 1000


class PlanPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The shape of one request's plan (SPEC §10).

    Attributes:
        max_offers: distinct targets the plan may hold, counted after ordering
            over the requested (or rerouted) model's offers and every fallback
            model's, so a long catalog does not spend the budget on offers
            ranked last. The context-length and content-policy fallback lists
            are capped to the same number, each on its own.
    """

    max_offers: int = 3


class PinnedPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a pinned `provider/model` confines (SPEC §3 step 1: a pinned request
    is tried on that provider's offers only). `allow_other_providers` False (default): the whole
    plan (reroutes, fallback models, special lists) keeps only that provider's offers; True: only
    the requested model is confined (`turnout.core.plan.build_plan`)."""

    allow_other_providers: bool = False


class Policy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """SPEC §4's policy with its defaults, the plan's cap (§10) and `PinnedPolicy`."""

    retry: RetryPolicy = RetryPolicy()
    fallback: FallbackPolicy = FallbackPolicy()
    budget: BudgetPolicy = BudgetPolicy()
    plan: PlanPolicy = PlanPolicy()
    pinned: PinnedPolicy = PinnedPolicy()


MOST = 2**31 - 1
"""The largest count or duration (ms: 24.8 days) a policy or a ceiling holds. Larger values meant
nothing a request could use, and broke the job's encoding (msgpack holds no int past 2^64) or
Redis's expiries."""
Count = Annotated[int, msgspec.Meta(ge=0, le=MOST)]
"""A count that may be 0 (`max_retries`) or a duration where 0 means none or no wait (`ttft_timeout_ms`)."""
AtLeastOne = Annotated[int, msgspec.Meta(ge=1, le=MOST)]
"""A count or a duration with no meaning at 0 (`max_attempts`, `per_attempt_timeout_ms`)."""


class Ceilings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Operator ceilings (SPEC §4, §11 `ceilings`). Defaults are the SPEC's;
    `max_offers` bounds `plan.max_offers`. Each is at least the least value of
    the policy field it bounds (`clamp_policy`): 0 for `max_retries`, 1 for the
    others, so a file below that is refused naming the ceiling itself; and at
    most `MOST`, as every policy number."""

    max_retries: Count = 6
    max_attempts: AtLeastOne = 6
    max_total_latency_ms: AtLeastOne = 180_000
    max_cycles: AtLeastOne = 3
    max_offers: AtLeastOne = 20

    @property
    def max_total_latency_s(self) -> float:
        """`max_total_latency_ms` in seconds."""
        return self.max_total_latency_ms / 1000


class Clamp(msgspec.Struct, frozen=True, kw_only=True):
    """One field that clamping changed.

    Attributes:
        path: dotted field path (`budget.max_attempts`).
        requested: the value asked for.
        applied: the value in force.
    """

    path: str
    requested: int
    applied: int


CEILING_OF: Final = {
    "retry.max_retries": "max_retries",
    "retry.fallback_target_retries": "max_retries",
    "retry.stall_retries": "max_retries",
    "retry.per_attempt_timeout_ms": "max_total_latency_ms",
    "retry.ttft_timeout_ms": "max_total_latency_ms",
    "retry.stall_timeout_ms": "max_total_latency_ms",
    "fallback.max_cycles": "max_cycles",
    "budget.max_attempts": "max_attempts",
    "budget.max_total_latency_ms": "max_total_latency_ms",
    "plan.max_offers": "max_offers",
}
"""The `ceilings:` field that bounds each policy field from above (`clamp_policy`)."""


def clamp_reason(clamp: Clamp) -> str:
    """Why a value was clamped, for an error or a report: `9 is outside the allowed range (at most
    6: ceilings.max_retries)`, `10 ... (at least 250)`; the ceiling named when one set the bound."""
    if clamp.applied < clamp.requested:
        ceiling = CEILING_OF.get(clamp.path)
        bound = f"at most {clamp.applied}" + (f": ceilings.{ceiling}" if ceiling else "")
    else:
        bound = f"at least {clamp.applied}"
    return f"{clamp.requested} is outside the allowed range ({bound})"


BASE_MS_RANGE = (250, 60_000)
"""SPEC §3 Backoff: `base_ms` is clamped to 250–60 000 ms (but for `NO_BACKOFF`)."""
NO_BACKOFF = 0
"""`retry.base_ms` or `retry.max_ms` of 0: no wait between attempts of a target (a seed's "no
backoff delay between attempts"), kept as is, never clamped. Its risk: a target that answers
429 or 503 is asked again at once, and a `Retry-After` longer than 0 s is not waited for
(`max_ms` 0) but falls back now."""


def _bounded(path: str, value: int, low: int, high: int, clamps: list[Clamp]) -> int:
    applied = min(max(value, low), high)
    if applied != value:
        clamps.append(Clamp(path=path, requested=value, applied=applied))
    return applied


def clamp_policy(policy: Policy, ceilings: Ceilings) -> tuple[Policy, tuple[Clamp, ...]]:
    """Bring a policy within the operator's ceilings and the SPEC's ranges.

    Args:
        policy: the policy as saved or loaded.
        ceilings: the operator's ceilings.

    Returns:
        The policy in force and the clamps applied (empty when none), so the
        caller can report them (SPEC §4: "clamped at save time and the
        clamping is reported to the caller").

    Rules: counts are at least 0 (`max_attempts`, `max_cycles`,
    `plan.max_offers` at least 1),
    durations at least 1 ms, `base_ms` within 250–60 000 (SPEC §3), and
    `max_ms` at least `base_ms`; a `base_ms` or `max_ms` of 0 is kept (`NO_BACKOFF`).
    """
    clamps: list[Clamp] = []
    r, f, b = policy.retry, policy.fallback, policy.budget
    base_ms = NO_BACKOFF if r.base_ms == NO_BACKOFF else _bounded("retry.base_ms", r.base_ms, *BASE_MS_RANGE, clamps)
    max_ms = NO_BACKOFF if r.max_ms == NO_BACKOFF else _bounded("retry.max_ms", r.max_ms, base_ms, 3_600_000, clamps)
    retry = msgspec.structs.replace(
        r,
        max_retries=_bounded("retry.max_retries", r.max_retries, 0, ceilings.max_retries, clamps),
        base_ms=base_ms,
        max_ms=max_ms,
        per_attempt_timeout_ms=_bounded(
            "retry.per_attempt_timeout_ms", r.per_attempt_timeout_ms, 1, ceilings.max_total_latency_ms, clamps
        ),
        fallback_target_retries=_bounded(
            "retry.fallback_target_retries", r.fallback_target_retries, 0, ceilings.max_retries, clamps
        ),
        ttft_timeout_ms=_bounded("retry.ttft_timeout_ms", r.ttft_timeout_ms, 0, ceilings.max_total_latency_ms, clamps),
        stall_timeout_ms=_bounded(
            "retry.stall_timeout_ms", r.stall_timeout_ms, 0, ceilings.max_total_latency_ms, clamps
        ),
        stall_retries=_bounded("retry.stall_retries", r.stall_retries, 0, ceilings.max_retries, clamps),
    )
    fallback = msgspec.structs.replace(
        f,
        backoff_ms=_bounded("fallback.backoff_ms", f.backoff_ms, 0, 60_000, clamps),
        max_cycles=_bounded("fallback.max_cycles", f.max_cycles, 1, ceilings.max_cycles, clamps),
    )
    budget = BudgetPolicy(
        max_attempts=_bounded("budget.max_attempts", b.max_attempts, 1, ceilings.max_attempts, clamps),
        max_total_latency_ms=_bounded(
            "budget.max_total_latency_ms", b.max_total_latency_ms, 1, ceilings.max_total_latency_ms, clamps
        ),
    )
    plan = PlanPolicy(max_offers=_bounded("plan.max_offers", policy.plan.max_offers, 1, ceilings.max_offers, clamps))
    return Policy(retry=retry, fallback=fallback, budget=budget, plan=plan, pinned=policy.pinned), tuple(clamps)


class _Overrides(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A section of a partial policy: the fields a layer sets (UNSET: keep the lower layer's).

    Each number's type holds its domain (`Count`: at least 0; `AtLeastOne`),
    so a negative count or duration, or a 0 where none has a meaning, is
    refused where a partial policy is decoded (the file, the admin API),
    naming the field (`Expected `int` >= 0 - at `$.retry.max_retries``),
    as `limits` values are. Within its domain a value is brought inside the
    ceilings and the SPEC's ranges by `clamp_policy`, and the clamp reported.
    """

    def set_fields(self) -> dict[str, Any]:
        """The fields this layer sets, by name."""
        return {name: value for name in self.__struct_fields__ if (value := getattr(self, name)) is not UNSET}


class RetryOverrides(_Overrides, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The `retry` fields a layer sets (see `RetryPolicy`); a value outside its domain is refused
    where it is decoded (`_Overrides`)."""

    max_retries: Count | UnsetType = UNSET
    retry_on_status: tuple[StatusEntry, ...] | UnsetType = UNSET
    base_ms: Count | UnsetType = UNSET
    max_ms: Count | UnsetType = UNSET
    respect_retry_after: bool | UnsetType = UNSET
    per_attempt_timeout_ms: AtLeastOne | UnsetType = UNSET
    fallback_target_retries: Count | UnsetType = UNSET
    ttft_timeout_ms: Count | UnsetType = UNSET
    stall_timeout_ms: Count | UnsetType = UNSET
    stall_retries: Count | UnsetType = UNSET
    stream_recovery: Literal["none", "continue"] | UnsetType = UNSET


class FallbackOverrides(_Overrides, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The `fallback` fields a layer sets (see `FallbackPolicy`)."""

    enabled: bool | UnsetType = UNSET
    cross_provider_same_model: bool | UnsetType = UNSET
    models: tuple[str, ...] | UnsetType = UNSET
    comparable: bool | UnsetType = UNSET
    only: tuple[str, ...] | UnsetType = UNSET
    backoff_ms: Count | UnsetType = UNSET
    on_status: tuple[StatusEntry, ...] | UnsetType = UNSET
    max_cycles: AtLeastOne | UnsetType = UNSET
    credential_fallback: bool | UnsetType = UNSET
    on_exhausted: OnExhausted | UnsetType = UNSET


class BudgetOverrides(_Overrides, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The `budget` fields a layer sets (see `BudgetPolicy`)."""

    max_attempts: AtLeastOne | UnsetType = UNSET
    max_total_latency_ms: AtLeastOne | UnsetType = UNSET


class PlanOverrides(_Overrides, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The `plan` fields a layer sets (see `PlanPolicy`)."""

    max_offers: AtLeastOne | UnsetType = UNSET


class PinnedOverrides(_Overrides, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The `pinned` fields a layer sets (see `PinnedPolicy`)."""

    allow_other_providers: bool | UnsetType = UNSET


class PolicyOverrides(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A partial policy, as written in the configuration or sent to the admin API (SPEC §4, §6).

    Every section and field is optional: UNSET (or a `null` section) keeps
    the lower layer's value. Decoding it checks every name and type, so a
    partial policy that is not refused at decode always merges.
    """

    retry: RetryOverrides | None | UnsetType = UNSET
    fallback: FallbackOverrides | None | UnsetType = UNSET
    budget: BudgetOverrides | None | UnsetType = UNSET
    plan: PlanOverrides | None | UnsetType = UNSET
    pinned: PinnedOverrides | None | UnsetType = UNSET


SECTION_OVERRIDES: dict[str, type[_Overrides]] = {
    "retry": RetryOverrides,
    "fallback": FallbackOverrides,
    "budget": BudgetOverrides,
    "plan": PlanOverrides,
    "pinned": PinnedOverrides,
}
"""Each policy section's partial form (`Policy` field name -> its overrides Struct)."""


def merge_policy(base: Policy, override: PolicyOverrides | Mapping[str, Any]) -> Policy:
    """Lay a partial policy (as written in config or sent to the admin API) over `base`.

    Args:
        base: the policy of the lower layer (SPEC defaults, or gateway-wide).
        override: the partial policy; a mapping of the same shape
            (`{"retry": {...}, "budget": {...}}`) is decoded into
            `PolicyOverrides` first. Omitted fields keep `base`'s value.

    Returns:
        The merged policy, not yet clamped.

    Raises:
        msgspec.ValidationError: (a mapping only) an unknown section or
            field, a value of the wrong type or outside its domain
            (`_Overrides`); msgspec's message names the offending path
            (`$.retry.max_retries`).
    """
    if not isinstance(override, PolicyOverrides):
        override = msgspec.convert(override, PolicyOverrides)
    sections: dict[str, Any] = {}
    for name in SECTION_OVERRIDES:
        section, patch = getattr(base, name), getattr(override, name)
        sections[name] = msgspec.structs.replace(section, **patch.set_fields()) if patch else section
    return Policy(**sections)


def with_override(overrides: PolicyOverrides, path: str, value: Any) -> PolicyOverrides:
    """`overrides` with one field (`retry.max_retries`, as in `Clamp.path`) set to `value`."""
    name, field = path.split(".", 1)
    section = getattr(overrides, name) or SECTION_OVERRIDES[name]()
    return msgspec.structs.replace(overrides, **{name: msgspec.structs.replace(section, **{field: value})})
