"""What the dashboard's Activity pages show: attempt rows grouped into requests.

Owns: the pure part of the Activity view — a request's summary built from
its attempt rows (`turnout.observability.records` rows, SPEC §9), its badges, the delay
before each attempt and why, and the filters. No I/O, no clock.
Must not import: FastAPI, Redis.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from turnout.core.attempt_phases import IN_FLIGHT_KIND
from turnout_ingress.ui.client_view import ClientAnswer, client_answer

MODEL_FALLBACK_ROLES = frozenset(
    {"model_fallback", "comparable_alternate", "context_window_fallback", "content_policy_fallback"}
)
OUTCOMES = ("ok", "failed")
_CURSOR = re.compile(r"^\(?\d{1,20}-\d{1,20}$")

DELAY_REASONS = {
    "backoff": "backoff (full jitter)",
    "retry_after": "the provider's Retry-After",
    "fallback_backoff": "fallback backoff",
}
"""`delay_reason` of a record, as the detail page words it."""


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt as the detail page shows it.

    Attributes:
        number: attempt number, from 1.
        target: `provider/model` (the upstream model name).
        role: the target's role in the plan (`primary`, `provider_fallback`, ...).
        klass: the SPEC §3 class of the outcome; kind: the classified outcome.
        status: upstream HTTP status, or None (transport failure).
        delay_before_ms: milliseconds waited before it (>= 0).
        delay_why: why it waited ("" when it did not).
        duration_ms: how long it took.
        flags: the record's set flags (`retry`, `fallback`, ..., `rerun`, `lost`).
    """

    number: int
    target: str
    role: str
    klass: str
    kind: str
    status: int | None
    delay_before_ms: float
    delay_why: str
    duration_ms: float
    flags: tuple[str, ...]


CONSIDERED_WHY = {
    "capped": "past plan.max_offers",
    "one_per_model": "one offer per model (fallback.cross_provider_same_model off)",
    "preferences": "left out by the request's provider preferences",
    "no_credential": "no credential",
    "not_reached": "not reached (served or stopped before it)",
    "circuit_open": "circuit open",
    "resting": "resting (Retry-After)",
    "ramping": "in slow start",
    "credential_open": "the org's own key keeps failing",
    "plan_capped": "usage cap not reset",
    "unsupported": "cannot express the request",
}
"""A considered offer's `reason` (`turnout.core.considered`), as the detail page words it."""


class ConsideredOffer(msgspec.Struct, frozen=True, kw_only=True):
    """An offer of the plan the request did not attempt, as the detail page shows it.

    Attributes:
        target: `provider/model` (the upstream model name).
        catalog_model: the catalog model it serves.
        why: the reason in words (`CONSIDERED_WHY`, else the stored reason).
        reopen_in_s: seconds until an offer out of rotation could be tried again, or None.
    """

    target: str
    catalog_model: str
    why: str
    reopen_in_s: float | None


def considered(last: dict[str, Any]) -> tuple[ConsideredOffer, ...]:
    """The offers of the plan not attempted, from the request's last row (`considered`, a
    list of `{provider, model, catalog_model, reason, reopen_in_s}`; rows without it: none)."""
    items = last.get("considered")
    return tuple(
        ConsideredOffer(
            target=f"{c.get('provider')}/{c.get('model')}",
            catalog_model=str(c.get("catalog_model", "")),
            why=CONSIDERED_WHY.get(str(c.get("reason")), str(c.get("reason"))),
            reopen_in_s=c.get("reopen_in_s"),
        )
        for c in (items if isinstance(items, list) else [])
        if isinstance(c, dict)
    )


class RequestSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One request as the Activity list shows it.

    Attributes:
        request_id: the request's id; entry_id: stream id of its newest row.
        ts: start of its first attempt (epoch s).
        org, squad, key: who sent it (`squad` may be None).
        requested_model: the model asked for; served_model: the last attempt's upstream model.
        provider: the last attempt's provider; providers: every provider attempted.
        status: the last attempt's upstream status (None: transport failure).
        outcome: "ok" when the last attempt succeeded, "in_flight" while it
            runs, else "failed" (a lost attempt too).
        latency_ms: first attempt's start to the last attempt's end.
        cost_usd: sum over its attempts.
        badges: labels in a fixed order (`Retried ×2`, `Provider fallback`, ...).
        attempts: its attempts, by number.
        considered: the plan's offers it did not attempt, and why (from its last row).
        answer: what the client was answered (`client_view.client_answer`).
    """

    request_id: str
    entry_id: str
    ts: float
    org: str
    squad: str | None
    key: str
    requested_model: str
    served_model: str
    provider: str
    providers: tuple[str, ...]
    status: int | None
    outcome: str
    latency_ms: float
    cost_usd: float
    badges: tuple[str, ...]
    attempts: tuple[Attempt, ...]
    considered: tuple[ConsideredOffer, ...] = ()
    answer: ClientAnswer | None = None


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """Activity filters; None (or "") leaves a dimension open.

    `model` matches the requested or a served model; `provider` any attempted
    provider; `outcome` is "ok" or "failed"; `since_s` / `until_s` bound the
    request's start (epoch s, inclusive).
    """

    org: str | None = None
    squad: str | None = None
    key: str | None = None
    model: str | None = None
    provider: str | None = None
    outcome: str | None = None
    since_s: float | None = None
    until_s: float | None = None

    def matches(self, rows: list[dict[str, Any]]) -> bool:
        """True when the request of these attempt rows (at least one) passes every set filter.

        Works on the rows, before a summary is built: a page that filters
        out most requests reads them cheaply.
        """
        first = rows[0]
        if (
            (self.org and first.get("org") != self.org)
            or (self.squad and first.get("squad") != self.squad)
            or (self.key and first.get("key") != self.key)
        ):
            return False
        if (
            self.model
            and self.model != first.get("requested_model")
            and not any(r.get("served_model") == self.model for r in rows)
        ):
            return False
        if self.provider and not any(r.get("provider") == self.provider for r in rows):
            return False
        if self.outcome and outcome_of(in_order(rows)[-1]) != self.outcome:
            return False
        if self.since_s is not None or self.until_s is not None:
            start_s = min(float(r.get("ts", 0.0)) for r in rows)
            if (self.since_s is not None and start_s < self.since_s) or (
                self.until_s is not None and start_s > self.until_s
            ):
                return False
        return True


def in_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's rows in the order its attempts were made: by run (a re-run after
    a worker died comes after the run it replaces), then attempt number."""
    return sorted(rows, key=lambda r: (int(r.get("run") or 1), int(r.get("attempt", 0))))


def outcome_of(last: dict[str, Any]) -> str:
    """A request's outcome from its last attempt's row: "ok", "in_flight" (still running) or "failed"."""
    kind = last.get("kind")
    return "ok" if kind == "success" else "in_flight" if kind == IN_FLIGHT_KIND else "failed"


_SEQ_MAX = 2**64 - 1
"""A Redis stream id's sequence is an unsigned 64-bit number; a larger one is a Redis error."""
_MS_MAX = 253_402_300_799_999
"""The latest stream id time a cursor may name (ms: 9999-12-31T23:59:59.999Z). The reader computes
bounds from it, and a time near 2^64 ms would round past what Redis accepts."""


def valid_cursor(value: str | None) -> str | None:
    """`value` when it is a stream position the reader accepts (`<ms>-<seq>`, `(` for exclusive; its
    time at most `_MS_MAX`, its sequence at most 2^64-1; an exclusive one after `0-0`), else None: the
    first page, as a bad cursor is ignored (a page's own links never send one). Redis refuses the
    others with an error the page once showed as Redis being unreachable."""
    if value is None or not _CURSOR.match(value):
        return None
    ms, seq = (int(part) for part in value.lstrip("(").split("-"))
    if ms > _MS_MAX or seq > _SEQ_MAX or (value.startswith("(") and ms == seq == 0):
        return None
    return value


def badges(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """The badges of a request from its attempt rows (any order), in display order.

    `Retried ×N` counts every attempt after the first, retries and fallbacks alike (503,
    503, then 200 on another provider is *Retried ×2* with a *Provider fallback* badge); a fallback attempt is a
    *Model fallback* when its plan role changes the model, else a *Provider
    fallback* (rows written before roles were recorded: provider fallback
    when the provider differs from the first attempt's). Reroute, BYOK
    fallback, Strategy, Plan fallback and Comparable alternate follow their record flags; `Re-run`
    marks a job run again after its worker died, `Lost ×N` the attempts that
    died with it (outcome unknown, maybe billed).
    """
    ordered = in_order(rows)
    out: list[str] = []
    retries = len(ordered) - 1
    if retries > 0:
        out.append(f"Retried ×{retries}")
    first_provider = ordered[0].get("provider") if ordered else None
    provider_fb = model_fb = False
    for r in ordered:
        if not r.get("is_fallback"):
            continue
        role = r.get("role")
        if role in MODEL_FALLBACK_ROLES:
            model_fb = True
        elif role == "provider_fallback" or (role is None and r.get("provider") != first_provider):
            provider_fb = True
        elif role is None:
            model_fb = True
    if provider_fb:
        out.append("Provider fallback")
    if model_fb:
        out.append("Model fallback")
    for flag, label in (
        ("is_reroute", "Reroute"),
        ("is_byok_fallback", "BYOK fallback"),
        ("is_strategy", "Strategy"),
        ("is_plan_fallback", "Plan fallback"),
        ("is_comparable", "Comparable alternate"),
    ):
        if any(r.get(flag) for r in ordered):
            out.append(label)
    if any(r.get("is_rerun") for r in ordered):
        out.append("Re-run")
    lost = sum(1 for r in ordered if r.get("lost"))
    if lost:
        out.append(f"Lost ×{lost}")
    return tuple(out)


def _why(row: dict[str, Any], previous: dict[str, Any] | None, delay_ms: float) -> str:
    if previous is None:
        return ""
    after = f"after {previous.get('class')}" + (f" {previous['status']}" if previous.get("status") else "")
    reason = DELAY_REASONS.get(str(row.get("delay_reason")))
    if reason is not None:
        return f"{reason} {after}"
    if row.get("is_retry"):
        return f"retry {after}"
    if row.get("is_fallback"):
        return f"fallback {after}"
    return after if delay_ms > 0 else ""


def attempts(rows: list[dict[str, Any]]) -> tuple[Attempt, ...]:
    """A request's attempts in order, each with the delay before it and why.

    The delay is the record's `delay_before_s` when present; for older rows,
    the gap between the previous attempt's end and this one's start (>= 0).
    """
    ordered = in_order(rows)
    out: list[Attempt] = []
    previous: dict[str, Any] | None = None
    for r in ordered:
        if r.get("delay_before_s") is not None:
            delay_ms = float(r["delay_before_s"]) * 1000.0
        elif previous is not None:
            prev_end_s = float(previous.get("ts", 0.0)) + float(previous.get("latency_ms") or 0.0) / 1000.0
            delay_ms = max(0.0, (float(r.get("ts", 0.0)) - prev_end_s) * 1000.0)
        else:
            delay_ms = 0.0
        flags = tuple(
            name.removeprefix("is_")
            for name in (
                "is_retry",
                "is_fallback",
                "is_reroute",
                "is_byok_fallback",
                "is_strategy",
                "is_plan_fallback",
                "is_comparable",
                "is_rerun",
                "lost",
            )
            if r.get(name)
        )
        out.append(
            Attempt(
                number=int(r.get("attempt", 0)),
                target=f"{r.get('provider')}/{r.get('served_model')}",
                role=str(r.get("role") or ""),
                klass=str(r.get("class") or r.get("kind") or ""),
                kind=str(r.get("kind", "")),
                status=r.get("status"),
                delay_before_ms=round(delay_ms, 1),
                delay_why=_why(r, previous, delay_ms),
                duration_ms=round(float(r.get("latency_ms") or 0.0), 1),
                flags=flags,
            )
        )
        previous = r
    return tuple(out)


def summarize(entry_id: str, rows: list[dict[str, Any]]) -> RequestSummary:
    """The summary of one request from its rows (at least one; any order).

    Args:
        entry_id: stream id of the request's newest row (the Activity cursor).
        rows: the request's attempt rows.
    """
    ordered = in_order(rows)
    first, last = ordered[0], ordered[-1]
    start_s = float(first.get("ts", 0.0))
    end_s = max(float(r.get("ts", 0.0)) + float(r.get("latency_ms") or 0.0) / 1000.0 for r in ordered)
    providers = tuple(dict.fromkeys(str(r.get("provider")) for r in ordered))
    return RequestSummary(
        request_id=str(first.get("request_id")),
        entry_id=entry_id,
        ts=start_s,
        org=str(first.get("org", "")),
        squad=first.get("squad"),
        key=str(first.get("key", "")),
        requested_model=str(first.get("requested_model", "")),
        served_model=str(last.get("served_model", "")),
        provider=str(last.get("provider", "")),
        providers=providers,
        status=last.get("status"),
        outcome=outcome_of(last),
        latency_ms=round(max(0.0, end_s - start_s) * 1000.0, 1),
        cost_usd=sum(float(r.get("cost_usd") or 0.0) for r in ordered),
        badges=badges(ordered),
        attempts=attempts(ordered),
        considered=considered(last),
        answer=client_answer(ordered),
    )
