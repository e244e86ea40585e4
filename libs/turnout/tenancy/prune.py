"""What the configuration file removes from the tenancy store: what it wrote and no longer declares.

Owns: the pure rule applied to each stored org at every start of an ingress
(after the file's `orgs:` are merged, `turnout.tenancy.bootstrap`):

1. an org the file created (its settings' origin is `config`) that the file
   no longer declares is removed whole, as if never created (no tombstone: a
   file that declares it again creates it again) — with the demo's org and
   its published key once the demo's file is no longer the one served;
2. in any other org, each squad, gateway key, BYOK key and custom endpoint
   the file wrote (origin `config`) that the file no longer declares is
   removed, with the operator's ceiling the file set on it; a squad a
   remaining key still belongs to stays;
3. what the admin API created or edited (origin `api`), and every org the
   API created, is never removed by the file.

Must not import: services, FastAPI, arq, httpx, Redis.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol, TypeVar

import msgspec

from turnout.config import OrgConfig
from turnout.stored.orgs import Meta, OrgDoc


class _Owned(Protocol):
    @property
    def meta(self) -> Meta: ...


T = TypeVar("T", bound=_Owned)


def _kept(kind: str, items: Mapping[str, T], declared: Collection[str], removed: list[str]) -> dict[str, T]:
    """`items` without those the file wrote and does not declare (rule 2); their paths go to `removed`."""
    out: dict[str, T] = {}
    for name, item in items.items():
        if item.meta.origin == "config" and name not in declared:
            removed.append(f"{kind}.{name}")
        else:
            out[name] = item
    return out


def prune_undeclared(doc: OrgDoc) -> tuple[OrgDoc | None, list[str]]:
    """An org the file does not declare, without what the file wrote (module rules 1–3).

    Returns:
        (None when the whole org goes — the removed paths are then `["org"]` — else as `prune`).
    """
    if doc.settings_meta.origin == "config":
        return None, ["org"]
    return prune(doc, None)


def prune(doc: OrgDoc, declared: OrgConfig | None) -> tuple[OrgDoc, list[str]]:
    """`doc` without the objects the file wrote and no longer declares (module rules 2–3).

    Args:
        doc: the stored org.
        declared: the file's org of that id, or None when the file does not declare it.

    Returns:
        (the document to store — `doc` itself when nothing is removed — and the removed
        paths: `keys.<name>`, `squads.<name>`, `provider_keys.<provider>`, `custom_endpoints.<id>`).
    """
    removed: list[str] = []
    keys = _kept("keys", doc.keys, [k.name for k in declared.keys] if declared else (), removed)
    in_use = {k.squad for k in keys.values() if k.squad is not None}
    squads = _kept("squads", doc.squads, {*(declared.squads if declared else ()), *in_use}, removed)
    provider_keys = _kept("provider_keys", doc.provider_keys, declared.provider_keys if declared else (), removed)
    endpoints = _kept("custom_endpoints", doc.custom_endpoints, declared.custom_endpoints if declared else (), removed)
    if not removed:
        return doc, []
    return (
        msgspec.structs.replace(
            doc,
            keys=keys,
            squads=squads,
            provider_keys=provider_keys,
            custom_endpoints=endpoints,
            ceilings={path: c for path, c in doc.ceilings.items() if path not in removed},
        ),
        removed,
    )
