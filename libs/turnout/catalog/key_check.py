"""Whether a starting process can open the provider keys the stored catalog seals.

Owns: the start-up refusal of an ingress or worker that cannot open a single
one of the catalog's sealed provider keys. Such a process lacks the fleet's
`TURNOUT_SECRET_KEY` (not set, or another value): every offer of those
providers is skipped there as having no credential, so in a fleet where the
other processes hold the key, the requests it takes fail and the others'
succeed, one in two with two workers. Refusing to start makes the mistake
visible at once, with the fix named, instead of as a share of 502s.

A process that opens some sealed keys and not others holds the fleet's key:
the ones it cannot open are stale (sealed under a key since removed from
every process), the same in every process, and it starts, logging each one
as the catalog loads (`turnout.catalog.doc.resolve_key`). The check runs on
the catalog in force after the bootstrap rule (`turnout.catalog.seed`), so a
process whose file replaces the catalog (`TURNOUT_CATALOG_FROM_FILE=1`, a new
file) is checked against what it wrote, and a process that started before
Redis answered is not refused later.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from turnout.catalog.doc import platform_key_binding
from turnout.stored.catalog import CatalogDoc
from turnout.vault import SECRET_KEY_ENV, SecretUnreadable, Vault, VaultUnavailable

SHOWN_PROVIDERS = 5
"""Providers named in a refusal; more are counted ("and 3 more")."""


class SealedKeysRefused(Exception):
    """The process cannot open any of the stored catalog's sealed provider keys (its message says how to fix it)."""


def sealed_providers(doc: CatalogDoc) -> list[str]:
    """The providers of `doc` whose key is stored sealed, sorted by name."""
    return sorted(name for name, entry in doc.providers.items() if entry.key is not None and entry.key.sealed)


def refusal(doc: CatalogDoc, vault: Vault, *, service: str) -> str | None:
    """Why a process with `vault` must not serve `doc`, or None when it may.

    Args:
        doc: the catalog in force (after the bootstrap rule).
        vault: the process's vault (`TURNOUT_SECRET_KEY`).
        service: the process's name for the message (`turnout worker`).

    Returns:
        None when `doc` seals no provider key or `vault` opens at least one of
        them; else a one-line message naming the providers and the fix.
    """
    sealed = sealed_providers(doc)
    if not sealed:
        return None
    for name in sealed:
        key = doc.providers[name].key
        assert key is not None and key.sealed is not None  # sealed_providers kept only these
        try:
            vault.open(key.sealed, platform_key_binding(name))
        except (VaultUnavailable, SecretUnreadable):
            continue
        return None
    shown = ", ".join(sealed[:SHOWN_PROVIDERS]) + (
        f" and {len(sealed) - SHOWN_PROVIDERS} more" if len(sealed) > SHOWN_PROVIDERS else ""
    )
    why = (
        f"{SECRET_KEY_ENV} is not set"
        if not vault.configured
        else f"no key in this process's {SECRET_KEY_ENV} opens them"
    )
    return (
        f"{service} refused to start: the catalog in Redis seals the keys of provider(s) {shown} and {why}, "
        f"so every request it took for them would fail. Give it the {SECRET_KEY_ENV} of the rest of the fleet "
        f"(`turnout dev` keeps its own in .turnout/secret.key), or replace the catalog with this process's file "
        f"(TURNOUT_CATALOG_FROM_FILE=1)."
    )
