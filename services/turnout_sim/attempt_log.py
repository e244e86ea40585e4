"""In-memory record of every attempt the simulator received, and step cursors.

Owns: the attempt log served at `/sim/log` and the per-scenario cursors that
decide which step the next request consumes and, for `down`/`fail`/`cap`,
its `Verdict` (the `cap` windows live in the cursors). Both live in one
process and are cleared together by `DELETE /sim/log`.
Must not import: aiohttp or any provider wire module; no I/O, no clock (times
are passed in by the caller).
"""

from __future__ import annotations

import enum
import hashlib
from collections import deque
from dataclasses import dataclass, field

from turnout_sim import faults
from turnout_sim.faults import Verdict
from turnout_sim.scenarios import Step, StepKind

ScenarioKey = tuple[str, str | None]
"""(full model name, `x-sim-scenario` header value or None)."""


def auth_fingerprint(authorization: str | None) -> str | None:
    """First 8 hex digits of the SHA-256 of an Authorization header value.

    Args:
        authorization: the raw header value (`Bearer sk-...`), or None.

    Returns:
        The fingerprint, or None when the header was absent. The key itself is
        never stored.
    """
    if authorization is None:
        return None
    return hashlib.sha256(authorization.encode("utf-8")).hexdigest()[:8]


class End(enum.StrEnum):
    """How the simulator finished with a request (`end` in `/sim/log`)."""

    COMPLETE = "complete"
    """The whole response was written (any status, including error bodies and
    `badchunk`/`nodone`/`bodyerr` answers, which are complete on the wire)."""
    CLIENT_GONE = "client_gone"
    """The client closed the connection before the response was complete."""
    FAULT = "fault"
    """The simulator reset or closed the connection without completing the
    response: `reset`, `close`, `cut<N>`, or a `hang`/`stall<N>` connection
    closed because the server is shutting down."""


@dataclass(slots=True, kw_only=True)
class Attempt:
    """One received request, as shown by `GET /sim/log`.

    Attributes:
        seq: 1-based arrival order since the last clear.
        t_s: receive time, epoch seconds (float).
        model: the requested model name, or None if the body had none.
        step: the step token applied, or None when the request was rejected
            before a step was consumed (auth, bad JSON, bad scenario).
        status: HTTP status sent, or None for socket faults / not yet decided.
        stream: whether the request asked for SSE.
        auth_fingerprint: see `auth_fingerprint`.
        request_id: the request's `x-request-id` header, or None.
        ended_s: when the simulator finished with the request, epoch seconds
            (float): response fully written, connection reset/closed by a
            fault, or the client's disconnect noticed. None while still open.
        end: how it finished (see `End`), or None while still open.
        received: what the request carried, for handlers that keep it (the
            Anthropic one: `body`, its text as received, and `headers`, its
            `anthropic-*` headers, never a key; the Responses one: `body` and
            its `openai-beta` header); None: not kept (and left out
            of `/sim/log`).
    """

    seq: int
    t_s: float
    model: str | None
    step: str | None
    status: int | None
    stream: bool
    auth_fingerprint: str | None
    request_id: str | None
    ended_s: float | None = None
    end: End | None = None
    received: dict[str, object] | None = None

    def finish(self, end: End, now_s: float) -> bool:
        """Record how and when the request ended; only the first call counts.

        Args:
            end: how it ended.
            now_s: the current time, epoch seconds.

        Returns:
            True if this call recorded the end, False if it was already set.
        """
        if self.end is not None:
            return False
        self.end, self.ended_s = end, now_s
        return True

    def to_json(self) -> dict[str, object]:
        """The JSON object served by `/sim/log` (`received` only when kept)."""
        entry: dict[str, object] = {
            "seq": self.seq,
            "t_s": self.t_s,
            "model": self.model,
            "step": self.step,
            "status": self.status,
            "stream": self.stream,
            "auth_fingerprint": self.auth_fingerprint,
            "request_id": self.request_id,
            "ended_s": self.ended_s,
            "end": None if self.end is None else self.end.value,
        }
        if self.received is not None:
            entry["received"] = self.received
        return entry


@dataclass(slots=True)
class AttemptLog:
    """Append-only list of attempts, in arrival order, until cleared."""

    _entries: list[Attempt] = field(default_factory=list)
    _next_seq: int = 1

    def record(
        self,
        *,
        t_s: float,
        model: str | None,
        stream: bool,
        authorization: str | None,
        request_id: str | None,
        step: str | None = None,
        status: int | None = None,
    ) -> Attempt:
        """Append an attempt and return it so the caller can set its status.

        Args:
            t_s: receive time, epoch seconds.
            model: requested model name, if known.
            stream: whether SSE was requested.
            authorization: raw Authorization header value (only hashed).
            request_id: the `x-request-id` header value, if any.
            step: the step token, if one was consumed already.
            status: the HTTP status, if already decided.

        Returns:
            The new (mutable) entry.
        """
        attempt = Attempt(
            seq=self._next_seq,
            t_s=t_s,
            model=model,
            step=step,
            status=status,
            stream=stream,
            auth_fingerprint=auth_fingerprint(authorization),
            request_id=request_id,
        )
        self._next_seq += 1
        self._entries.append(attempt)
        return attempt

    def entries(self, model: str | None = None) -> list[Attempt]:
        """All attempts in order, optionally only those for one model name."""
        if model is None:
            return list(self._entries)
        return [a for a in self._entries if a.model == model]

    def clear(self) -> None:
        """Forget every attempt and restart `seq` at 1."""
        self._entries.clear()
        self._next_seq = 1


@dataclass(slots=True)
class _Cursor:
    consumed: int
    first_seen_s: float
    admitted_s: deque[float] = field(default_factory=deque)


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """What one request of a scenario key gets.

    Attributes:
        step: the step it consumed.
        elapsed_s: seconds since the key's first request (0.0 on the first).
        ordinal: 0-based index of the request among its key's requests.
        verdict: `Verdict.SERVE` unless the step is `down` (inside its
            window), `fail` (roll below P) or `cap` (over capacity).
    """

    step: Step
    elapsed_s: float
    ordinal: int
    verdict: Verdict


@dataclass(slots=True)
class ScenarioCursors:
    """Which step each scenario key consumes next; the last step repeats."""

    _cursors: dict[ScenarioKey, _Cursor] = field(default_factory=dict)

    def advance(self, key: ScenarioKey, steps: tuple[Step, ...], now_s: float) -> tuple[Step, float]:
        """Consume the next step of a scenario.

        Args:
            key: (model name, header value or None) identifying the sequence.
            steps: the parsed scenario (non-empty).
            now_s: the current time, epoch seconds.

        Returns:
            The step to apply and the seconds elapsed since this key's first
            request (0.0 on the first one); `down<N>s` uses the latter.
        """
        cursor = self._cursors.get(key)
        if cursor is None:
            cursor = self._cursors[key] = _Cursor(consumed=0, first_seen_s=now_s)
        step = steps[min(cursor.consumed, len(steps) - 1)]
        cursor.consumed += 1
        return step, now_s - cursor.first_seen_s

    def turn(self, key: ScenarioKey, steps: tuple[Step, ...], now_s: float, *, seed: int) -> Turn:
        """Consume the next step of a scenario and decide its verdict.

        `down<N>s` is unavailable while `elapsed_s < N`; `fail<P>` is
        unavailable when `faults.fails(P, seed, key, ordinal)`; `cap<N>` is
        overloaded when `faults.admit` refuses it over this key's admitted
        arrival times (only admitted requests count).

        Args:
            key: (model name, header value or None) identifying the sequence.
            steps: the parsed scenario (non-empty).
            now_s: the request's arrival time, epoch seconds.
            seed: the simulator's seed for `fail` rolls.

        Returns:
            The request's `Turn`.
        """
        step, elapsed_s = self.advance(key, steps, now_s)
        cursor = self._cursors[key]
        ordinal = cursor.consumed - 1
        verdict = Verdict.SERVE
        if (
            step.kind is StepKind.DOWN
            and elapsed_s < (step.seconds or 0)
            or step.kind is StepKind.FAIL
            and faults.fails(step.percent or 0, seed, key, ordinal)
        ):
            verdict = Verdict.UNAVAILABLE
        elif step.kind is StepKind.CAP and not faults.admit(cursor.admitted_s, now_s, step.capacity_per_s or 1):
            verdict = Verdict.OVERLOADED
        return Turn(step=step, elapsed_s=elapsed_s, ordinal=ordinal, verdict=verdict)

    def clear(self) -> None:
        """Restart every scenario from its first step."""
        self._cursors.clear()
