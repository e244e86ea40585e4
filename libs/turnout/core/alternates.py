"""Comparable alternates: the models of the requested model's class a plan may end with (issue #45
item 7): when no offer of the requested model or its configured fallbacks can serve, another model
of the same class still answers.

Owns: the rule that picks them and the model constraint of a policy's fallbacks. A catalog model may
declare a `class` (a comparability class, `frontier-chat`); with `fallback.comparable: true` the
plan appends, after the requested model's offers and its configured fallback models, the other
models of that class, in catalog order (the order of `models:` in the file or the stored catalog:
the operator's own ranking, so no price or health guess picks a weaker model first). They are
never the requested model, a reroute model or a configured fallback again. `fallback.only` (a
constraint on the candidate set) keeps the policy's model fallbacks, the
configured and the comparable ones, to the models it lists; the requested model and its reroutes
are not fallbacks and are never constrained.
Must not import: anything outside the standard library, msgspec and `turnout.core`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

CLASS_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""A class name: lowercase letters, digits, `.`, `_`, `-`, 1 to 64 characters, starting with a
letter or digit (`frontier-chat`, `small-chat`)."""


def constrained(models: Iterable[str], only: Sequence[str]) -> list[str]:
    """`models` in their order, kept to those `only` lists; all of them when `only` is empty
    (no constraint: `fallback.only` unset)."""
    if not only:
        return list(models)
    allowed = frozenset(only)
    return [m for m in models if m in allowed]


def comparable_alternates(
    model: str,
    classes: Mapping[str, str],
    catalog_order: Iterable[str],
    *,
    exclude: frozenset[str],
    only: Sequence[str] = (),
) -> list[str]:
    """The comparable alternates of `model`, in the order the plan appends them.

    Args:
        model: the requested catalog model (not a `provider/model` pin, not a custom entry).
        classes: catalog model id -> its class; models without one are absent. Built from chat
            models only (`turnout.catalog.Catalog.classes`): an embedding model never has a class.
        catalog_order: every catalog model id, in catalog order.
        exclude: models already in the plan (requested, rerouted, configured fallbacks).
        only: `fallback.only` (empty: no constraint).

    Returns:
        The other models of `model`'s class in catalog order, less `exclude` and those `only` does
        not list; empty when `model` has no class.
    """
    klass = classes.get(model)
    if klass is None:
        return []
    same = (m for m in dict.fromkeys(catalog_order) if m != model and m not in exclude and classes.get(m) == klass)
    return constrained(same, only)
