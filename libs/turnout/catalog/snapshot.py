"""Catalog: the routable view of a validated configuration.

Owns: model id -> targets, provider name -> how to reach it, prices. Built
from a `Config` (the file's, or the one in Redis: `turnout.catalog.live`);
read-only afterwards: a change builds a new `Catalog` and swaps it whole.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec

from turnout.config import Config, OfferApi, ProviderConfig, embedding_models, has_shared_credential
from turnout.core.model_types import ModelType
from turnout.core.ordering import OfferPrice, OrderSettings
from turnout.core.plan import split_pinned
from turnout.core.types import Target


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """Catalog prices of one offer in USD per million tokens."""

    input_usd_per_mtok: float = 0.0
    output_usd_per_mtok: float = 0.0

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """Cost of one call in USD."""
        return (input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok) / 1_000_000


class Catalog:
    """Models, their offers, and the providers behind them.

    Attributes:
        models: catalog model id -> its targets in configured order.
        providers: provider name -> its configuration (holds the shared key;
            never log this object).
        keyed_providers: names of the providers whose platform key (or, `vertex`,
            service-account file) is configured.
        prices: target key -> price.
        supports_prefill: target key -> the offer accepts an assistant prefill.
        apis: target key -> the upstream API it is called at (`turnout.config.OfferApi`).
        responses_offers: keys of the `api: responses` targets (none: no request needs to
            carry its `/v1/responses` body).
        orders: model id -> its ordering strategy (`turnout.core.ordering`).
        offer_prices: target key -> its prices as the orderings read them.
        price_mix: the `routing.price_mix` of the configuration.
        sole_targets: keys of targets that are the only offer of some model
            (their breaker opens only at a high failure rate, SPEC §5).
        embedding_models: ids of the models of `type: embedding`
            (`turnout.core.model_types`); every other model is a chat model.
        classes: chat model id -> its comparability class (`class:`), for the models that declare
            one (`turnout.core.alternates`); an embedding model never counts, whatever it says.
    """

    def __init__(self, config: Config) -> None:
        raw = config.raw
        self.models: dict[str, tuple[Target, ...]] = {
            # a repeated offer is one target (a catalog stored before the file check refused repeats)
            model_id: tuple(
                dict.fromkeys(Target(provider=o.provider, model=o.model, catalog_model=model_id) for o in spec.offers)
            )
            for model_id, spec in raw.models.items()
        }
        self.providers: Mapping[str, ProviderConfig] = dict(raw.providers)
        self.provider_names = frozenset(raw.providers)
        self.keyed_providers = frozenset(name for name, p in raw.providers.items() if has_shared_credential(p))
        self.prices: dict[str, Price] = {}
        for spec in raw.models.values():
            for o in spec.offers:
                self.prices[f"{o.provider}/{o.model}"] = Price(
                    input_usd_per_mtok=o.input_usd_per_mtok, output_usd_per_mtok=o.output_usd_per_mtok
                )
        self.supports_prefill: dict[str, bool] = {
            f"{o.provider}/{o.model}": o.supports_prefill for spec in raw.models.values() for o in spec.offers
        }
        self.apis: dict[str, OfferApi] = {
            f"{o.provider}/{o.model}": o.api_in_force for spec in raw.models.values() for o in spec.offers
        }
        self.responses_offers = frozenset(key for key, api in self.apis.items() if api == "responses")
        self.orders: dict[str, str] = {m: s.order for m, s in raw.models.items()}
        self.offer_prices: dict[str, OfferPrice] = {
            key: OfferPrice(input_usd_per_mtok=p.input_usd_per_mtok, output_usd_per_mtok=p.output_usd_per_mtok)
            for key, p in self.prices.items()
        }
        self.price_mix = raw.routing.price_mix
        self.sole_targets = frozenset(t[0].key for t in self.models.values() if len(t) == 1)
        self.embedding_models = embedding_models(raw)
        self.classes: dict[str, str] = {
            m: c
            for m, spec in raw.models.items()
            if (c := spec.comparability_class) is not None and m not in self.embedding_models
        }

    def type_of(self, model: str) -> ModelType:
        """The type of the model a request names: a catalog id, or a pinned `provider/model`
        (`turnout.core.plan.split_pinned`); anything else (`custom:` entries, unknown ids) is `chat`."""
        base, _ = split_pinned(model, self.models, self.provider_names)
        return "embedding" if base in self.embedding_models else "chat"

    @property
    def current(self) -> Catalog:
        """This catalog (a fixed catalog is its own `CatalogSource`)."""
        return self

    def order_settings(self, base: OrderSettings) -> OrderSettings:
        """`base` (the breaker's tolerance and exploration) with this catalog's prices and mix."""
        return msgspec.structs.replace(base, prices=self.offer_prices, price_mix=self.price_mix)

    def model_list(self) -> list[dict[str, object]]:
        """The `GET /v1/models` data: one OpenAI model object per catalog id."""
        return [{"id": m, "object": "model", "created": 0, "owned_by": "turnout"} for m in sorted(self.models)]


class CatalogSource(Protocol):
    """Where a process reads the catalog in force: a fixed `Catalog`, or the live one
    kept in step with Redis (`turnout.catalog.live.LiveCatalog`).

    Read `current` once per request and keep that snapshot for the whole
    request: a swap never mixes two catalogs inside one plan.
    """

    @property
    def current(self) -> Catalog:
        """The catalog in force now (an immutable snapshot)."""
        ...
