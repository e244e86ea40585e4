"""The catalog: which models exist, their offers, and the providers behind them (SPEC §11).

Owns, one job per module:
- `snapshot`: `Catalog`, the routable view of one configuration (immutable);
- `doc`: the catalog document (as stored: `turnout.stored.catalog`; keys only
  as references) from a file and back to a validated configuration, with the
  file's rules;
- `key_check`: whether a process can open the stored catalog's sealed keys;
- `ownership`: which catalog entries the file owns, and what a start does with each (pure);
- `seed`: the bootstrap rule between a process's file and Redis;
- `live`: the catalog in force in one process, swapped whole;
- `watch`: keeping it in step with Redis (pub/sub + version re-check);
- `references`: what still names a model or a provider (why a delete is refused).

`Catalog` and `CatalogSource`, which most of the library and the services
type against, are re-exported here (importing them loads `snapshot` only);
every other name is imported from its module.
"""

from __future__ import annotations

from turnout.catalog.snapshot import Catalog, CatalogSource

__all__ = ["Catalog", "CatalogSource"]
