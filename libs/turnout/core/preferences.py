"""Per-request routing preferences: the body's `provider` object (SPEC §10).

Owns: the shape of the preferences a request may send (`order`, `only`,
`ignore`, `sort`, `max_price`, `allow_fallbacks`), their validation with the
offending field named, and the pure rules that apply them to one model's
ranked offers. Preferences only narrow or reorder what the key's settings and
the catalog give; nothing here can add a model, an offer or a provider.
Must not import: anything outside the standard library, msgspec and
`turnout.core`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import msgspec

from turnout.core.field_values import with_enum_values
from turnout.core.ordering import OfferPrice, SortName, Standing, TargetHealth
from turnout.core.types import Target

ProviderName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Names = Annotated[tuple[ProviderName, ...], msgspec.Meta(max_length=100)]
UsdPerMtok = Annotated[float, msgspec.Meta(ge=0)]


class MaxPrice(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Highest catalog prices an offer may have, USD per million tokens (None: no limit).

    Attributes:
        prompt: limit on the offer's input price.
        completion: limit on the offer's output price.
    """

    prompt: UsdPerMtok | None = None
    completion: UsdPerMtok | None = None


class Preferences(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one request asks of routing (the body's `provider` object).

    Attributes:
        order: provider names to try first, in this order; the request's
            other offers follow in the model's own order (unless
            `allow_fallbacks` is false).
        only: provider names the request may use (None: any).
        ignore: provider names the request must not use.
        sort: rank offers by `price`, `latency` or `throughput` for this
            request, instead of the model's `order:`.
        max_price: drop offers priced above these limits; an offer whose
            price the catalog does not know (a custom endpoint) is dropped too.
        allow_fallbacks: false = no model fallbacks (fallback maps, the
            gateway's fallback models, context and content-policy lists),
            and of the model's offers only those of the `order` providers,
            or only the first-ranked one when `order` is empty.
    """

    order: Names = ()
    only: Names | None = None
    ignore: Names = ()
    sort: SortName | None = None
    max_price: MaxPrice | None = None
    allow_fallbacks: bool = True

    @property
    def narrows(self) -> bool:
        """Whether these preferences may leave out some of the offers and fallbacks the key
        would get (`only`, `ignore`, `max_price`, `allow_fallbacks: false`); `order` and
        `sort` alone only reorder."""
        return bool(self.only is not None or self.ignore or self.max_price is not None or not self.allow_fallbacks)


class InvalidPreferences(ValueError):
    """The `provider` object is malformed.

    Attributes:
        param: the offending field's path (`provider.max_price.prompt`).
    """

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def decode_preferences(value: Any) -> Preferences:
    """Validate the body's `provider` value (decoded JSON).

    Returns:
        The preferences; `None` (or absent) means none.

    Raises:
        InvalidPreferences: not an object, an unknown field, a wrong type,
            an empty name, a negative price, an unknown `sort`; `param` names
            the field (`provider.only[1]`).
    """
    if value is None:
        return Preferences()
    if not isinstance(value, dict):
        raise InvalidPreferences("`provider` must be an object.", "provider")
    try:
        return msgspec.convert(value, Preferences)
    except msgspec.ValidationError as exc:
        text = str(exc)
        at = re.search(r"- at `\$(.*)`", text)
        path = "provider" + (at.group(1) if at else "")
        unknown = re.match(r"Object contains unknown field `([^`]*)`", text)
        if unknown:
            path += f".{unknown.group(1)}"
        reason = text.split(" - at ")[0]
        if at:
            reason = with_enum_values(reason, Preferences, at.group(1))
        raise InvalidPreferences(f"`{path}` is invalid: {reason}.", path) from exc


def admits(target: Target, prefs: Preferences, prices: Mapping[str, OfferPrice]) -> bool:
    """Whether `prefs` let the request use `target` (`only`, `ignore`, `max_price`)."""
    if prefs.only is not None and target.provider not in prefs.only:
        return False
    if target.provider in prefs.ignore:
        return False
    limit = prefs.max_price
    if limit is None or (limit.prompt is None and limit.completion is None):
        return True
    price = prices.get(target.key)
    if price is None:
        return False  # a price nobody knows cannot be shown to be under the limit
    return not (
        (limit.prompt is not None and price.input_usd_per_mtok > limit.prompt)
        or (limit.completion is not None and price.output_usd_per_mtok > limit.completion)
    )


def apply(
    ranked: Sequence[Target],
    prefs: Preferences,
    prices: Mapping[str, OfferPrice],
    health: Mapping[str, TargetHealth],
    *,
    listing: bool = False,
) -> tuple[Target, ...]:
    """One model's ranked offers as `prefs` narrow and reorder them.

    Args:
        ranked: the offers as the ordering strategy ranked them.
        prefs: the request's preferences.
        prices: target key -> catalog prices (`max_price`).
        health: target key -> health (DOWN targets stay last, whatever `order` says).
        listing: keep every admitted offer even without `allow_fallbacks`
            and `order`: which one is first depends on health (a listing of
            the targets whose health to read, `build_plan(capped=False)`).

    Returns:
        The admitted offers (`admits`); those of the `order` providers first,
        in that order, then the rest in their ranked order, DOWN ones last;
        without `allow_fallbacks`, only the `order` providers' offers (or the
        first one when `order` is empty). A subsequence of `ranked`'s targets,
        never a new one.
    """
    kept = [t for t in ranked if admits(t, prefs, prices)]
    place = {name: i for i, name in reversed(list(enumerate(prefs.order)))}
    down = {t.key for t in kept if health.get(t.key, TargetHealth()).standing is Standing.DOWN}
    kept.sort(key=lambda t: (t.key in down, place.get(t.provider, len(place))))
    if not prefs.allow_fallbacks:
        kept = [t for t in kept if t.provider in place] if place else kept if listing else kept[:1]
    return tuple(kept)
