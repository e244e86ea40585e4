"""The catalog: which models exist, their offers, and the providers behind them (SPEC §11).

Owns, one job per module:
- `snapshot`: `Catalog`, the routable view of one configuration (immutable);
- `doc`: the catalog as stored in Redis (keys only as references) and back
  to a validated configuration, with the file's rules;
- `seed`: the bootstrap rule between a process's file and Redis;
- `live`: the catalog in force in one process, swapped whole;
- `watch`: keeping it in step with Redis (pub/sub + version re-check);
- `references`: what still names a model or a provider (why a delete is refused).

The names below are re-exported; each module is imported on first use
(PEP 562), like the other packages of the library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnout import lazy_face

if TYPE_CHECKING:
    from turnout.catalog.doc import CatalogDoc as CatalogDoc
    from turnout.catalog.live import LiveCatalog as LiveCatalog
    from turnout.catalog.snapshot import Catalog as Catalog
    from turnout.catalog.snapshot import CatalogSource as CatalogSource
    from turnout.catalog.snapshot import Price as Price
    from turnout.catalog.watch import CatalogWatch as CatalogWatch
    from turnout.catalog.watch import attach as attach

#: Public name -> the module of this package that defines it.
FACE = {
    "CatalogDoc": "doc",
    "LiveCatalog": "live",
    "Catalog": "snapshot",
    "CatalogSource": "snapshot",
    "Price": "snapshot",
    "CatalogWatch": "watch",
    "attach": "watch",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_face(__name__, FACE)
