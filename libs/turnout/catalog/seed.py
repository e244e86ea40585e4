"""Bootstrap rule: when a process's configuration file writes the catalog in Redis.

Owns: the one decision each process (ingress or worker) takes at start
between its file's `providers:` / `models:` and the catalog in Redis:

1. Redis holds no catalog: the file seeds it (the first process to start
   wins; the others find it written).
2. The operator asks (`TURNOUT_CATALOG_FROM_FILE=1` on the process): the
   file replaces the catalog, admin edits included.
3. The file was applied before (its digest is known): Redis is in force.
   A file that differs from Redis (a stale file, or admin edits since) is
   logged as a warning — it never overwrites the catalog.
4. A file never applied before (the operator changed it): it replaces the
   catalog when the catalog's last write came from a file; when admin edits
   were made since, Redis is kept and the mismatch logged (rule 2 applies it).

Every write is one versioned compare-and-set (`turnout.state.catalog_store`),
so two processes starting together never interleave.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import logging
from typing import Literal

from turnout.catalog.doc import doc_from_config, file_digest, same_catalog
from turnout.config import Config
from turnout.state.catalog_store import CatalogConflict, CatalogStore
from turnout.state.switches import CATALOG_FROM_FILE
from turnout.state.tenant_store import CAS_ATTEMPTS
from turnout.stored.catalog import CatalogDoc
from turnout.vault import Vault

log = logging.getLogger("turnout.catalog")

FROM_FILE_ENV = CATALOG_FROM_FILE
"""Turned on (`1`, `true`, `yes`, `on`: `turnout.state.switches`) on a process, its file replaces the catalog
in Redis at start (rule 2)."""

Outcome = Literal["seeded", "applied", "forced", "kept"]


def decide(doc: CatalogDoc | None, digest: str, known: bool, *, force: bool) -> Outcome:
    """Which rule applies (module doc): write the file (`seeded`, `forced`, `applied`) or keep Redis (`kept`).

    Args:
        doc: the catalog in Redis (None: none yet).
        digest: the file's digest (`turnout.catalog.doc.file_digest`).
        known: the digest was applied before.
        force: the operator asked for the file (rule 2).
    """
    if doc is None:
        return "seeded"
    if force:
        return "forced" if doc.file_digest != digest or doc.origin == "api" else "kept"
    if known or doc.file_digest == digest:
        return "kept"
    return "applied" if doc.origin == "file" else "kept"


async def seed(store: CatalogStore, file: Config, vault: Vault, *, force: bool = False) -> Outcome:
    """Apply the bootstrap rule for this process's `file`; log a mismatch left in place.

    Returns:
        What happened (`decide`).

    Raises:
        CatalogConflict: the catalog kept changing during the write.
        StateUnavailable: Redis is unreachable.
        turnout.vault.VaultUnavailable: never (a key is sealed only with a vault key).
    """
    digest = file_digest(file)
    for _ in range(CAS_ATTEMPTS):
        doc, version = await store.load()
        known = doc is not None and await store.applied(digest)
        outcome = decide(doc, digest, known, force=force)
        if outcome == "kept":
            if doc is not None and not same_catalog(doc, file):
                _warn_mismatch(doc, version, known, file.source)
            return outcome
        if await store.write(doc_from_config(file, vault), version, remember_file=digest) is not None:
            log.info(
                "catalog: %s from %s (%d model(s), %d provider(s))",
                outcome,
                file.source,
                len(file.raw.models),
                len(file.raw.providers),
            )
            return outcome
    raise CatalogConflict("the catalog kept changing while the file was applied; retry")


def _warn_mismatch(doc: CatalogDoc, version: int, known: bool, source: str) -> None:
    why = (
        "this file was applied before (a stale copy)"
        if known
        else "the catalog holds admin edits made after the last file was applied"
    )
    log.warning(
        "catalog: the models/providers of %s differ from the catalog in Redis (version %d, last written by %s); "
        "Redis's catalog is in force because %s. To replace it with this file, start one process with %s=1.",
        source,
        version,
        "the admin API" if doc.origin == "api" else "a file",
        why,
        FROM_FILE_ENV,
    )
