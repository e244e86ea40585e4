"""Decisions of the time- and chance-dependent steps: `down`, `fail`, `cap`.

Owns: the `Verdict` a request of such a step gets — served, unavailable
(503) or overloaded — as pure functions of their arguments: the seeded roll
of `fail<P>` and the sliding-window admission of `cap<N>`.
Must not import: aiohttp, the wire modules, `random`; no I/O and no clock
(times are passed in, epoch seconds).
"""

from __future__ import annotations

import enum
import hashlib
from collections import deque

CAP_WINDOW_S = 1.0
"""Length of the `cap<N>` sliding window, in seconds."""

_ROLL_SPAN = 1 << 64


class Verdict(enum.StrEnum):
    """What a request's step decided, before any response byte."""

    SERVE = "serve"
    """Answer as the step says (a success for `down`, `fail`, `cap`)."""
    UNAVAILABLE = "unavailable"
    """503 with the provider's realistic body (`down` window, `fail` roll)."""
    OVERLOADED = "overloaded"
    """Over capacity (`cap`): the wire's overload answer (503 + Retry-After
    on the OpenAI routes, 529 `overloaded_error` on the Anthropic route)."""


def fail_roll(seed: int, key: tuple[str, str | None], ordinal: int) -> float:
    """The `fail<P>` roll of one request, uniform over [0, 100).

    A pure function: BLAKE2b (8-byte digest) over the seed, the scenario key
    and the request's ordinal, read as an unsigned integer and scaled to
    [0, 100). The process's global random state is never used, so a run is
    reproduced exactly by the same seed and the same request order per key.

    Args:
        seed: the simulator's seed (`create_app(seed=...)`).
        key: the scenario key, (model name, `x-sim-scenario` value or None).
        ordinal: 0-based index of the request among its key's requests since
            the last `DELETE /sim/log`.

    Returns:
        A float in [0, 100).
    """
    model, header = key
    text = f"{seed}\x1f{model}\x1f{header!r}\x1f{ordinal}"
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") * 100.0 / _ROLL_SPAN


def fails(percent: int, seed: int, key: tuple[str, str | None], ordinal: int) -> bool:
    """Whether a `fail<percent>` request answers 503.

    Args:
        percent: the failure probability in percent, 0..100 (0 never fails,
            100 always fails).
        seed, key, ordinal: as for `fail_roll`.

    Returns:
        True when the roll is below `percent`.
    """
    return fail_roll(seed, key, ordinal) < percent


def admit(admitted_s: deque[float], now_s: float, capacity: int, window_s: float = CAP_WINDOW_S) -> bool:
    """Sliding-window admission for `cap<N>`; records the request if admitted.

    Only admitted requests count toward capacity: a request is served when
    fewer than `capacity` requests were admitted in the half-open window
    (now_s - window_s, now_s]; refused requests leave no trace, like a
    provider that sheds load before doing any work. Under a steady overload
    exactly `capacity` requests are served per window.

    Args:
        admitted_s: arrival times (epoch seconds, non-decreasing) of the
            key's admitted requests; pruned and appended in place.
        now_s: this request's arrival time, epoch seconds.
        capacity: requests per window, >= 1.
        window_s: window length in seconds (> 0).

    Returns:
        True if admitted (and `now_s` appended), False if over capacity.
    """
    horizon_s = now_s - window_s
    while admitted_s and admitted_s[0] <= horizon_s:
        admitted_s.popleft()
    if len(admitted_s) >= capacity:
        return False
    admitted_s.append(now_s)
    return True
