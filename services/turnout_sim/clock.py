"""Clocks for `create_app(clock=...)`.

Owns: the clock type the simulator accepts and a manual clock for tests.
Must not import: anything outside the standard library.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
"""A wall clock returning epoch seconds (float), like `time.time`."""


class ManualClock:
    """A wall clock that only moves when told to; for tests (`down<N>s`).

    Attributes:
        now_s: the current time, epoch seconds.
    """

    def __init__(self, now_s: float = 1_750_000_000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        """The current time, epoch seconds."""
        return self.now_s

    def advance(self, seconds: float) -> None:
        """Move the clock forward by `seconds` (s)."""
        self.now_s += seconds
