"""Budgets as ceilings: the reservation a request holds, and the usage it settles to (SPEC §10, issue #40).

Owns: the pure arithmetic of a hard budget held against concurrency — a
request's worst-case cost (what admission reserves), whether it fits what
is left of a budget (spend plus every reservation in flight), and the
`tpm` debt an answer's usage leaves in a token bucket. No clock and no
Redis: `turnout.state.limit_store` runs `fits` and `charged` in its Lua
scripts; the unit tests hold the two to the same answers.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.

Rules:

- Amounts are integer micro-USD (1 USD = 1 000 000), rounded so that a
  reservation never undercounts (`micro_usd_up`) and a budget never
  overcounts (`micro_usd_down`): Lua's doubles add them exactly.
- A request is admitted under a hard budget only when
  `spent + reserved + worst ≤ budget`, checked and written in one atomic
  step, so what is spent and held in flight never exceeds the budget
  whatever the concurrency. The reservation is replaced by the actual
  cost in one step: the process that served the request writes its cost
  to the ledger and removes its reservation in the same script
  (`turnout.state.spend_store`, "Exact settlement"); the bound
  on spend is therefore `budget + one request's (actual − reserved)`,
  which is 0 when the request's `max_tokens` is sent (prices are the
  dearest offer of its plan, the prompt counted by bytes / 4, an
  overcount for text and JSON) and at most one request's worst case in
  all: a hold only ever stands for one request.
- `tpm` is charged the estimate at admission and settled to the usage the
  answer reports: the difference is added to the bucket's level, which may
  then stand above its capacity (a debt): later requests wait until it has
  drained, so over any span `tpm` bounds the tokens used whatever the
  requests said.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

MICRO_PER_USD = 1_000_000
"""Micro-USD per USD: the unit reservations are kept in."""

SETTLE_HOLD_MS = 10_000
"""How long a reservation stays after its answer has been sent when nothing settled it, ms:
the fallback for a process that died between the answer and its ledger write (the
settlement itself removes the reservation with the cost, at once). Longer than the
worker's bookkeeping after the answer plus the spend ledger's flush interval (0.25 s)."""


def micro_usd_up(usd: float) -> int:
    """`usd` in micro-USD, rounded up (a reservation never undercounts). `usd` ≥ 0."""
    return math.ceil(max(0.0, usd) * MICRO_PER_USD - 1e-6)


def micro_usd_down(usd: float) -> int:
    """`usd` in micro-USD, rounded down (a budget never grows by rounding). `usd` ≥ 0."""
    return math.floor(max(0.0, usd) * MICRO_PER_USD + 1e-6)


def prompt_tokens(body_bytes: int) -> int:
    """The prompt estimate of a request body: a quarter of its bytes, rounded up (as `tpm` counts it)."""
    return -(-max(0, body_bytes) // 4)


def completion_bound(requested: int | None, ceiling: int | None, default: int) -> int:
    """The completion tokens a request may use: its own `max_tokens` when it sends one,
    else the lowest `max_tokens` ceiling in force, else the gateway's
    `default_completion_tokens` (README "Budgets")."""
    if requested is not None:
        return requested
    return ceiling if ceiling is not None else default


def worst_case_usd(prompt: int, completion: int, n: int, prices: Sequence[tuple[float, float]]) -> float:
    """The most a request can cost, USD: the dearest offer of its plan at `prompt`
    input tokens and `completion × n` output tokens.

    Args:
        prompt: estimated prompt tokens (`prompt_tokens`).
        completion: completion tokens per choice (`completion_bound`).
        n: choices (≥ 1).
        prices: per offer, (input, output) USD per million tokens; empty: 0.
    """
    out_tokens = completion * max(1, n)
    return max(((prompt * i + out_tokens * o) / 1_000_000 for i, o in prices), default=0.0)


def fits(budget_micro: int, spent_micro: int, reserved_micro: int, worst_micro: int) -> bool:
    """True when a request of worst case `worst_micro` fits a budget of `budget_micro`
    already spent `spent_micro` with `reserved_micro` held by requests in flight; a budget
    already spent fits nothing, not even a worst case of 0 (`turnout.core.budget.decide`)."""
    return spent_micro < budget_micro and spent_micro + reserved_micro + worst_micro <= budget_micro


def charged(level: int, estimate: int, used: int, window_ms: int) -> int:
    """A `tpm` bucket's level (token·ms) once a request estimated at `estimate` tokens
    is settled to the `used` tokens its answer reported.

    The difference, either way, moves the level by `window_ms` per token;
    the level may exceed the bucket's capacity (a debt the next requests
    wait out) and never drops below 0.
    """
    return max(0, level + (used - estimate) * window_ms)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def reported_tokens(answer: Mapping[str, Any]) -> int | None:
    """The tokens an answer body says it used (prompt and completion), or None when it says none.

    Reads the usage of every shape a surface answers in: OpenAI's chat and legacy
    completions and embeddings (`usage.total_tokens`, else `prompt_tokens` +
    `completion_tokens`), Anthropic's Messages and OpenAI's Responses (`usage.input_tokens`
    + `output_tokens`, with Anthropic's cache reads and writes), Gemini's
    (`usageMetadata.totalTokenCount`).
    """
    usage = answer.get("usage")
    if isinstance(usage, Mapping):
        if "total_tokens" in usage:
            return _count(usage.get("total_tokens"))
        fields = (
            "prompt_tokens",
            "completion_tokens",
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
        if any(f in usage for f in fields):
            return sum(_count(usage.get(f)) for f in fields)
    metadata = answer.get("usageMetadata")
    if isinstance(metadata, Mapping) and "totalTokenCount" in metadata:
        return _count(metadata.get("totalTokenCount"))
    return None


def answer_tokens(body: bytes) -> int | None:
    """The tokens a successful answer's body reports (`reported_tokens`), or None: not JSON,
    or no usage in it."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return reported_tokens(answer) if isinstance(answer, dict) else None
