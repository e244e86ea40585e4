"""One request's deadline: its latency budget counted from its arrival at the ingress.

Owns: `Deadline`, computed once per request when the ingress knows the
caller's policy (SPEC §4 `budget.max_total_latency_ms`: "wall-clock deadline
from arrival at the ingress") and passed along to every path that serves it
— the queue (`JobPayload.deadline_epoch_s`), the direct streaming path, an
idempotent replay's wait, the idempotency key's lifetime. Pure: the arrival
time and "now" are given.
"""

from __future__ import annotations

import msgspec

from turnout.core.policy import BudgetPolicy


class Deadline(msgspec.Struct, frozen=True, kw_only=True):
    """A request's deadline.

    Attributes:
        arrived_s: when the request arrived at the ingress (epoch seconds).
        budget_s: its latency budget (seconds, `max_total_latency_ms / 1000`).
    """

    arrived_s: float
    budget_s: float

    @classmethod
    def of(cls, arrived_s: float, budget: BudgetPolicy) -> Deadline:
        """The deadline of a request that arrived at `arrived_s` (epoch s) under `budget`."""
        return cls(arrived_s=arrived_s, budget_s=budget.max_total_latency_s)

    @property
    def at_s(self) -> float:
        """The deadline, epoch seconds."""
        return self.arrived_s + self.budget_s

    def left_s(self, now_s: float) -> float:
        """Seconds left at `now_s` (epoch s); <= 0 once it passed."""
        return self.at_s - now_s
