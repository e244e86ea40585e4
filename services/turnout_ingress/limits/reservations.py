"""Hard budgets as ceilings at the ingress: what a request reserves, and the 429 when it does not fit.

Owns: the reservation of a request's worst case against its key's hard budget
(`reservations`; the limiter writes it in its admission call,
`turnout.state.limit_store`), from its plan's prices and its `max_tokens`, and
the 429 `budget_exceeded` of a request whose worst case is more than what is
left (`over_budget`). The arithmetic is `turnout.core.reserve` (issue #40;
README "Budgets and spend strategies").
Must not import: `turnout_ingress.app`, `turnout_ingress.state`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from turnout.catalog import Catalog
from turnout.core.limits import lowest
from turnout.core.plan import Plan
from turnout.core.reserve import (
    MICRO_PER_USD,
    completion_bound,
    micro_usd_down,
    micro_usd_up,
    prompt_tokens,
    worst_case_usd,
)
from turnout.core.spend import KEY_PREFIX, SQUAD_PREFIX, period_bounds, period_id
from turnout.errors import RequestRejected
from turnout.state import keys
from turnout.state.limit_store import Reservation
from turnout.tenancy.identity import Identity


def whose(field: str) -> str:
    """The scope a ledger field names, as messages say it: `key `ci``, `squad `r``, `organization`."""
    if field.startswith(SQUAD_PREFIX):
        return f"squad `{field[len(SQUAD_PREFIX) :]}`"
    if field.startswith(KEY_PREFIX):
        return f"key `{field[len(KEY_PREFIX) :]}`"
    return "organization"


def spent_refusal(
    field: str, budget_usd: float, period: str, spent_usd: float, resets_at_s: float, now_s: float
) -> RequestRejected:
    """The 429 `budget_exceeded` of a hard budget already spent: names the budget, its period and
    what was spent; `Retry-After` until the period resets (UTC), `x-should-retry: false`."""
    resets = datetime.fromtimestamp(resets_at_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return RequestRejected(
        429,
        f"The {whose(field)} budget of {budget_usd:g} USD per {period} is spent ({spent_usd:.6g} USD); "
        f"it resets at {resets}.",
        error_type="insufficient_quota",
        code="budget_exceeded",
        # nothing changes before the period resets: SDKs should not retry it
        headers={"retry-after": str(max(1, int(resets_at_s - now_s + 0.999))), "x-should-retry": "false"},
    )


def _int_field(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reservations(
    identity: Identity,
    plan: Plan,
    catalog: Catalog,
    body: Mapping[str, Any],
    body_bytes: int,
    *,
    default_completion_tokens: int,
    now_s: float | None = None,
) -> tuple[Reservation, ...]:
    """What one request reserves against its key's hard budget (`turnout.core.reserve`).

    Args:
        identity: the caller (its budget in force, its `max_tokens` ceilings).
        plan: the request's plan: every offer of it is priced, the dearest counts.
        catalog: the catalog the plan was made with (its prices, USD per million tokens).
        body: the canonical chat body (`max_completion_tokens` / `max_tokens`, `n`).
        body_bytes: the request body's size (the prompt estimate, bytes / 4).
        default_completion_tokens: `gateway.default_completion_tokens`.
        now_s: epoch seconds (the budget's period); None = now.

    Returns:
        One reservation for a hard budget, else none (a soft budget only shapes routing).
    """
    scope = identity.budget
    if scope is None or scope.budget is None or not scope.budget.hard:
        return ()
    now = time.time() if now_s is None else now_s
    requested = _int_field(body, "max_completion_tokens")
    requested = _int_field(body, "max_tokens") if requested is None else requested
    ceiling = lowest(identity.limits, "max_tokens")
    completion = completion_bound(requested, ceiling[0] if ceiling else None, default_completion_tokens)
    entries = (*plan.entries, *plan.context_window, *plan.content_policy, *plan.plan_cap)
    prices = [
        (price.input_usd_per_mtok, price.output_usd_per_mtok)
        for entry in entries
        if (price := catalog.prices.get(entry.target.key)) is not None
    ]
    worst = worst_case_usd(prompt_tokens(body_bytes), completion, _int_field(body, "n") or 1, prices)
    pid = period_id(scope.budget.period, now)
    return (
        Reservation(
            spend_key=keys.spend_key(identity.org, scope.budget.period, pid),
            field=scope.field,
            set_key=keys.reservation_key(identity.org, scope.field, scope.budget.period, pid),
            budget_micro=micro_usd_down(scope.budget.usd),
            worst_micro=micro_usd_up(worst),
        ),
    )


def over_budget(
    identity: Identity, reservation: Reservation, spent_micro: int, held_micro: int, now_s: float | None = None
) -> RequestRejected:
    """The 429 `budget_exceeded` of a request whose worst case does not fit what is left.

    Args:
        reservation: the reservation refused.
        spent_micro / held_micro: what its budget had spent, and what requests in flight
            held of it then, µUSD.

    `Retry-After`: 1 s when requests in flight hold the room it needs (their reservations
    settle to their actual cost, which may leave it); until the period resets
    (`x-should-retry: false`) when the spend alone leaves no room for it. A budget already
    spent is `spent_refusal`'s answer (the admission script checks it: no read before it).
    """
    scope = identity.budget
    assert scope is not None and scope.budget is not None
    now = time.time() if now_s is None else now_s
    _, end = period_bounds(scope.budget.period, now)
    if spent_micro >= reservation.budget_micro:
        return spent_refusal(scope.field, scope.budget.usd, scope.budget.period, spent_micro / MICRO_PER_USD, end, now)
    resets = datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    left = max(0, reservation.budget_micro - spent_micro - held_micro) / MICRO_PER_USD
    headers = {"retry-after": "1"}
    if spent_micro + reservation.worst_micro > reservation.budget_micro:
        headers = {"retry-after": str(max(1, int(end - now + 0.999))), "x-should-retry": "false"}
    return RequestRejected(
        429,
        f"This request could cost up to {reservation.worst_micro / MICRO_PER_USD:.6g} USD, more than the "
        f"{left:.6g} USD left of the {whose(scope.field)} budget of {scope.budget.usd:g} USD per "
        f"{scope.budget.period} (spent and held by requests in flight); it resets at {resets}. "
        "Lower `max_tokens` or wait for requests in flight to finish.",
        error_type="insufficient_quota",
        code="budget_exceeded",
        headers=headers,
    )
