"""The catalog in force in one process, swapped whole when Redis's changes.

Owns: the process's current `Catalog` (and the `Config` it was built from,
and its catalog version), replaced by one assignment of a new immutable
snapshot — never edited in place — and the listeners told of each swap
(breakers' sole offers, the tenant directory's view, the scrubber).

Atomicity: a request reads `current` once (the router's `plan` / `route`
take that snapshot) and keeps it to the end, so it sees the old or the new
catalog, never a mix; a request in flight finishes on the catalog it
started with (a removed target's price stays known, so its attempts are
still priced). Breaker state of removed targets stays in Redis (harmless).
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from turnout.catalog.snapshot import Catalog
from turnout.config import Config

log = logging.getLogger("turnout.catalog")

Listener = Callable[[Config, Catalog], None]
"""Told of a swap with (the new configuration, its catalog)."""


class LiveCatalog:
    """The catalog in force (`turnout.catalog.CatalogSource`).

    Args:
        config: the configuration to serve until the first swap (the file's).
    """

    def __init__(self, config: Config) -> None:
        self._state: tuple[Catalog, Config, int] = (Catalog(config), config, 0)
        self._listeners: list[Listener] = []

    @property
    def current(self) -> Catalog:
        """The catalog in force now (immutable; read once per request)."""
        return self._state[0]

    @property
    def config(self) -> Config:
        """The configuration `current` was built from (the file with the catalog in force)."""
        return self._state[1]

    @property
    def version(self) -> int:
        """The catalog version in force (0: the file's, before Redis's was read)."""
        return self._state[2]

    def on_swap(self, listener: Listener) -> None:
        """Call `listener` after every swap (a failing listener is logged, never fatal)."""
        self._listeners.append(listener)

    def swap(self, config: Config, version: int) -> Catalog:
        """Put the catalog of `config` (at `version`) in force, whole, then tell the listeners.

        Returns:
            The new catalog.
        """
        catalog = Catalog(config)  # built before anything changes: the swap itself is one assignment
        # an attempt still in flight on a removed target is priced as its catalog priced it (records, spend);
        # prices are read only for targets a plan chose, so a removed target's price is never routed by
        catalog.prices = {**self.current.prices, **catalog.prices}
        self._state = (catalog, config, version)
        for listener in self._listeners:
            try:
                listener(config, catalog)
            except Exception:
                log.exception("catalog: a listener failed on version %d", version)
        return catalog
