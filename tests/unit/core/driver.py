"""A tiny simulation driver for the pure attempt loop (test helper, not a test).

`drive` plays the shell of `turnout.router` against a fake clock: it asks
`next_step`, advances the clock by a `Wait`'s delay, and answers a `Dispatch`
with a scripted outcome that takes a given duration. An attempt that would
outlast its `timeout_s` ends at the timeout as a per-attempt timeout, as the
adapters report it. Every step is kept so tests can assert on the whole run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnout.core.loop import (
    AttemptRecord,
    Dispatch,
    GiveUp,
    LoopState,
    SkipReason,
    StopReason,
    Wait,
    begin,
    next_step,
    on_outcome,
    on_skip,
)
from turnout.core.plan import Plan, PlanEntry, Role
from turnout.core.policy import Policy, merge_policy
from turnout.core.types import Outcome, Target, TransportError
from turnout.core.verdict import Verdict, conclude

OutcomeSource = Mapping[str, Sequence[Outcome]] | Callable[[Dispatch, float], Outcome]
"""Scripted outcomes per target key (`provider/model`), consumed in order, or
a callable `(dispatch, now_s) -> Outcome`."""

Duration = float | Callable[[Dispatch], float]
SkipRule = Callable[[Dispatch, float], tuple[SkipReason, float | None] | None]


# ---------------------------------------------------------------- outcomes


def ok(status: int = 200) -> Outcome:
    return Outcome(status=status)


def err(
    status: int,
    message: str = "",
    *,
    retry_after_s: float | None = None,
    code: str | None = None,
    type_: str | None = None,
) -> Outcome:
    return Outcome(status=status, message=message, retry_after_s=retry_after_s, error_code=code, error_type=type_)


def transport(kind: TransportError = TransportError.RESET) -> Outcome:
    return Outcome(transport=kind, message=str(kind))


def quota() -> Outcome:
    return err(
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        code="insufficient_quota",
        type_="insufficient_quota",
    )


def context_length() -> Outcome:
    return err(400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded")


def content_policy() -> Outcome:
    return err(
        400,
        "The response was filtered due to the prompt triggering the content management policy.",
        code="content_filter",
    )


# ---------------------------------------------------------------- plans


def target(provider: str, model: str, catalog_model: str | None = None) -> Target:
    return Target(provider=provider, model=model, catalog_model=catalog_model or model)


def entry(
    provider: str, model: str, role: Role = Role.PRIMARY, *, catalog_model: str | None = None, is_reroute: bool = False
) -> PlanEntry:
    return PlanEntry(target=target(provider, model, catalog_model), role=role, is_reroute=is_reroute)


def plan_of(
    *entries: PlanEntry,
    requested_model: str | None = None,
    context_window: Sequence[PlanEntry] = (),
    content_policy: Sequence[PlanEntry] = (),
    plan_cap: Sequence[PlanEntry] = (),
    rerouted: bool = False,
) -> Plan:
    requested = requested_model or (entries[0].target.catalog_model if entries else "m")
    return Plan(
        requested_model=requested,
        entries=tuple(entries),
        context_window=tuple(context_window),
        content_policy=tuple(content_policy),
        plan_cap=tuple(plan_cap),
        rerouted=rerouted,
    )


# ---------------------------------------------------------------- driver


@dataclass
class Run:
    """Everything one driven request did.

    Attributes:
        state: the final loop state.
        give_up: the final step.
        steps: `(clock when returned, step)` for every step, GiveUp last.
        attempts: `(start_s, end_s, dispatch)` for every attempt made.
        verdict: `conclude(...)` for a stop that did not serve, else None.
        now_s: the clock at the end.
    """

    state: LoopState
    give_up: GiveUp
    steps: list[tuple[float, Dispatch | Wait | GiveUp]] = field(default_factory=list)
    attempts: list[tuple[float, float, Dispatch]] = field(default_factory=list)
    verdict: Verdict | None = None
    now_s: float = 0.0

    @property
    def records(self) -> tuple[AttemptRecord, ...]:
        return self.state.records

    @property
    def waits(self) -> list[tuple[float, Wait]]:
        return [(t, s) for t, s in self.steps if isinstance(s, Wait)]

    @property
    def keys(self) -> list[str]:
        """Target keys attempted, in order."""
        return [r.target.key for r in self.state.records]

    @property
    def statuses(self) -> list[int | None]:
        return [r.status for r in self.state.records]


class ScriptExhausted(AssertionError):
    """A scripted target was attempted more often than it has outcomes."""


def drive(
    plan: Plan,
    policy: Policy = Policy(),
    outcomes: OutcomeSource | None = None,
    *,
    duration_s: Duration = 0.1,
    start_s: float = 0.0,
    deadline_s: float | None = None,
    rng: random.Random | None = None,
    skip: SkipRule | None = None,
    max_steps: int = 1000,
    begun: LoopState | None = None,
) -> Run:
    """Run the loop to its end against a fake clock.

    Args:
        plan: the plan.
        policy: the (clamped) policy.
        outcomes: per-target scripts or a callable; None answers 200 always.
        duration_s: seconds one attempt takes (or a callable per dispatch).
        start_s: clock at the start.
        deadline_s: absolute deadline; default start + `max_total_latency_ms`.
        rng: jitter source; default `random.Random(0)`.
        skip: called before each dispatch; a `(reason, reopen_in_s)` skips the
            target instead of attempting it.
        max_steps: bound on loop iterations (a test failure when exceeded).
        begun: a loop already begun (`begin_continuation`) instead of `begin(plan, policy, ...)`.

    Returns:
        The `Run`.
    """
    rng = rng or random.Random(0)
    now = start_s
    deadline = start_s + policy.budget.max_total_latency_ms / 1000.0 if deadline_s is None else deadline_s
    cursors: dict[str, int] = {}

    def outcome_for(d: Dispatch) -> Outcome:
        if outcomes is None:
            return ok()
        if callable(outcomes):
            return outcomes(d, now)
        key = d.entry.target.key
        script = outcomes.get(key)
        if script is None:
            raise ScriptExhausted(f"no outcomes scripted for {key}")
        i = cursors.get(key, 0)
        if i >= len(script):
            raise ScriptExhausted(f"{key} attempted {i + 1} times, {len(script)} outcomes scripted")
        cursors[key] = i + 1
        return script[i]

    state = begin(plan, policy, deadline_s=deadline) if begun is None else begun
    run_steps: list[tuple[float, Dispatch | Wait | GiveUp]] = []
    attempts: list[tuple[float, float, Dispatch]] = []
    for _ in range(max_steps):
        step = next_step(state, now)
        run_steps.append((now, step))
        if isinstance(step, GiveUp):
            verdict = None if step.reason is StopReason.SERVED else conclude(state, step.reason)
            return Run(state=state, give_up=step, steps=run_steps, attempts=attempts, verdict=verdict, now_s=now)
        if isinstance(step, Wait):
            now += step.delay_s
            continue
        skipped = skip(step, now) if skip is not None else None
        if skipped is not None:
            reason, reopen_in_s = skipped
            state = on_skip(state, step, reason=reason, reopen_in_s=reopen_in_s, now_s=now)
            continue
        outcome = outcome_for(step)
        took = duration_s(step) if callable(duration_s) else duration_s
        started = now
        if took > step.timeout_s:
            took, outcome = step.timeout_s, Outcome(transport=TransportError.ATTEMPT_TIMEOUT, message="timed out")
        now += took
        attempts.append((started, now, step))
        state = on_outcome(state, step, outcome, started_s=started, now_s=now, rng=rng)
    raise AssertionError(f"the loop did not end within {max_steps} steps")


# ---------------------------------------------------------------- shared plan entries and policies

A = entry("openai", "gpt-5")
B = entry("azure", "gpt-5-prod", Role.PROVIDER_FALLBACK, catalog_model="gpt-5")
C = entry("anthropic", "claude", Role.MODEL_FALLBACK)
CW = entry("google", "gemini-long", Role.CONTEXT_WINDOW_FALLBACK)
CP = entry("mistral", "mistral-large", Role.CONTENT_POLICY_FALLBACK)
KA, KB, KC, KCW, KCP = (e.target.key for e in (A, B, C, CW, CP))

ABC = plan_of(A, B, C)


def pol(**sections: dict[str, Any]) -> Policy:
    """A policy from partial sections: `pol(retry={"max_retries": 2})`."""
    return merge_policy(Policy(), sections)


class MaxRandom(random.Random):
    """Jitter always at the top of its range."""

    def uniform(self, a: float, b: float) -> float:
        return b


class ZeroRandom(random.Random):
    """Jitter always 0: retries follow at once."""

    def uniform(self, a: float, b: float) -> float:
        return a
