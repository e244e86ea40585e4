"""Operator ceilings: limits and budgets an org's admins may tighten but never lift, remove or escape.

Owns: which `limits` and `budget` values are the operator's (those the
configuration file or the operator key wrote at a scope, kept in
`OrgDoc.ceilings` by scope path), and the check an org admin's write must
pass: at the ceiling's own scope each field the operator set stays set and
at most the operator's value; at every scope below it (a squad or key under
an org ceiling, a key in a squad with one) a value set is at most the
ceiling. A key bound by its squad's ceiling is not moved out of it by an org
admin. Must not import: services, FastAPI, arq, httpx, Redis.

Why an org ceiling bounds the sum over the org's keys and squads: an org's
`limits` are one counter for all its traffic and its `budget` counts all its
spend (SPEC §10), so once an org admin cannot lift or remove them, new keys,
new squads and moved keys only share them. A squad's ceiling binds the keys
in that squad together, a key's that key (a new key is outside a key-level
ceiling: put the ceiling on the squad or the org to bound new keys).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from turnout.core.limits import Limits
from turnout.core.scopes import ScopeSettings
from turnout.core.spend import Budget
from turnout.stored.orgs import Ceiling, OrgDoc
from turnout.tenancy.admin import AdminError

Scope = tuple[str, str | None]
"""(`org` | `squad` | `key`, the squad's or key's name; None for the org)."""

CEILING_FIELDS: tuple[str, ...] = ("limits", "budget")
"""The settings that are ceilings when the operator writes them (README "Operator ceilings")."""

DAYS_PER_MONTH = 31
"""A `day` budget fits a `month` ceiling when 31 days of it do (the longest month)."""


def scope_path(scope: Scope) -> str:
    """A scope as a ceiling path: `org`, `squads.<name>` or `keys.<name>`."""
    kind, name = scope
    return "org" if kind == "org" else f"{kind}s.{name}"


def ceiling_of(settings: ScopeSettings) -> Ceiling | None:
    """The ceiling a scope's settings make when the operator writes them (None: neither limits nor budget)."""
    limits = settings.limits if isinstance(settings.limits, Limits) else None
    budget = settings.budget if isinstance(settings.budget, Budget) else None
    return None if limits is None and budget is None else Ceiling(limits=limits, budget=budget)


def with_ceiling(doc: OrgDoc, path: str, ceiling: Ceiling | None) -> OrgDoc:
    """`doc` with the operator's ceiling at `path` replaced (None: removed)."""
    ceilings = {p: c for p, c in doc.ceilings.items() if p != path}
    if ceiling is not None:
        ceilings[path] = ceiling
    return msgspec.structs.replace(doc, ceilings=ceilings)


def operator_wrote(doc: OrgDoc, scope: Scope, settings: ScopeSettings, named: tuple[str, ...]) -> OrgDoc:
    """`doc` after the operator key wrote `settings` at `scope`, naming the settings `named`.

    A `limits` or `budget` the operator names becomes that scope's ceiling
    (named as null: that ceiling is lifted); one it does not name keeps the
    ceiling it had.
    """
    path = scope_path(scope)
    old = doc.ceilings.get(path, Ceiling())
    new = ceiling_of(settings) or Ceiling()
    fields = {f: getattr(new if f in named else old, f) for f in CEILING_FIELDS}
    merged = Ceiling(**fields)
    return with_ceiling(doc, path, None if merged == Ceiling() else merged)


def _over(path: str, field: str, wrote: str, ceiling: object, who: str) -> AdminError:
    return AdminError(
        403,
        f"{field}: {wrote}; the operator's ceiling at {who} is {ceiling}. An org admin may set stricter "
        f"values, never looser ones; only the operator key raises or removes a ceiling.",
        code="operator_ceiling",
        param=field,
    )


def _budget_within(budget: Budget, ceiling: Budget) -> bool:
    """True when `budget` spends no more than `ceiling` allows in any of the ceiling's periods."""
    if ceiling.hard and not budget.hard:
        return False
    if budget.period == ceiling.period:
        return budget.usd <= ceiling.usd
    return budget.period == "day" and budget.usd * DAYS_PER_MONTH <= ceiling.usd


def _bounding(doc: OrgDoc, scope: Scope, squad: str | None | UnsetType) -> list[tuple[str, Ceiling]]:
    """The ceilings that bind `scope`: the org's, its squad's (for a key: `squad`, or the key's own), its own."""
    kind, name = scope
    paths = ["org"]
    if kind == "squad":
        paths.append(f"squads.{name}")
    if kind == "key":
        key = doc.keys.get(name or "")
        of = squad if not isinstance(squad, UnsetType) else (key.squad if key else None)
        if of is not None:
            paths.append(f"squads.{of}")
        paths.append(f"keys.{name}")
    return [(p, doc.ceilings[p]) for p in paths if p in doc.ceilings]


def check_within(
    doc: OrgDoc, scope: Scope, settings: ScopeSettings, *, squad: str | None | UnsetType = UNSET, root: str = "settings"
) -> None:
    """Refuse an org admin's settings at `scope` that lift, remove or escape an operator ceiling.

    Args:
        doc: the org's document (its `ceilings`).
        scope: where the settings go.
        settings: the scope's settings as they would be stored.
        squad: for a key, the squad it will be in (UNSET: the one it is in).
        root: the prefix of the field paths named (`settings`).

    Raises:
        AdminError: 403 `operator_ceiling`, `param` the field (`settings.limits.rpm`) and the
            message the ceiling's scope and value.
    """
    own = scope_path(scope)
    limits = settings.limits if isinstance(settings.limits, Limits) else None
    budget = settings.budget if isinstance(settings.budget, Budget) else None
    for path, ceiling in _bounding(doc, scope, squad):
        who = "the org" if path == "org" else path.replace("s.", " ", 1)
        if ceiling.limits is not None:
            for field, cap in msgspec.structs.asdict(ceiling.limits).items():
                value = None if limits is None else getattr(limits, field)
                if cap is None or (value is None and path != own):
                    continue
                if value is None or value > cap:
                    wrote = "removed" if value is None else f"{value} is above it"
                    raise _over(path, f"{root}.limits.{field}", wrote, cap, who)
        if ceiling.budget is not None and (budget is not None or path == own):
            if budget is None or not _budget_within(budget, ceiling.budget):
                wrote = "removed" if budget is None else f"{_show(budget)} is looser"
                raise _over(path, f"{root}.budget", wrote, _show(ceiling.budget), who)


def _show(budget: Budget) -> str:
    return f"${budget.usd:g} per {budget.period}{' (hard)' if budget.hard else ''}"


def check_move(doc: OrgDoc, key: str, squad: str | None) -> None:
    """Refuse an org admin's move of `key` out of a squad whose ceiling binds it, or into one its settings exceed.

    Raises:
        AdminError: 403 `operator_ceiling` (`param` `squad`).
    """
    current = doc.keys.get(key)
    if current is None:
        return
    if current.squad is not None and current.squad != squad and f"squads.{current.squad}" in doc.ceilings:
        raise AdminError(
            403,
            f"squad: key {key!r} is bound by the operator's ceiling at squad {current.squad}; "
            "only the operator key moves it out.",
            code="operator_ceiling",
            param="squad",
        )
    check_within(doc, ("key", key), current.settings, squad=squad)


def forget(doc: OrgDoc, path: str) -> OrgDoc:
    """`doc` without the ceiling of a deleted squad or key (`squads.x`, `keys.y`)."""
    return with_ceiling(doc, path, None) if path in doc.ceilings else doc


def ceilings_view(doc: OrgDoc) -> dict[str, Any]:
    """The org's operator ceilings by scope path, as JSON."""
    return {path: msgspec.to_builtins(c) for path, c in doc.ceilings.items()}
