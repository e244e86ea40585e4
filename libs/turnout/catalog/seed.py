"""Bootstrap rule: what a process's configuration file writes in the catalog in Redis.

Owns: the one write each process (ingress or worker) makes at start (and
again when Redis came back without its data) between its file's
`providers:` / `models:` and the catalog in Redis. The file is the source of
truth for the entries it owns (`turnout.catalog.ownership`, module rules):

1. Redis holds no catalog: the file seeds it (the first process to start
   wins; the others find it written).
2. An entry the file wrote and nobody edited since follows the file: written
   when the file's value differs from the one it wrote — a new file or a
   rollback to an earlier one alike — and removed when the file no longer
   declares it. A restart with the same file writes nothing.
3. An entry edited (or created) through the admin API is kept; the start
   logs a warning naming each entry kept over the file's value.
4. The operator asks (`TURNOUT_CATALOG_FROM_FILE=1` on the process): the
   file replaces the catalog, admin edits included.

A catalog that would break a rule (e.g. a kept admin model offering a
provider the file no longer declares) is not written: the start logs the
problem and keeps Redis's catalog. Every write is one versioned
compare-and-set (`turnout.state.catalog_store`) that also records which
entries the file owns, so two processes starting together never interleave.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from turnout.catalog.doc import doc_from_config, file_digest, file_entries, same_entries, stored_entries
from turnout.catalog.ownership import Plan, forced, legacy_record, plan
from turnout.config import Config
from turnout.errors import ConfigError
from turnout.state.catalog_store import CatalogConflict, CatalogStore
from turnout.state.switches import CATALOG_FROM_FILE
from turnout.state.tenant_store import CAS_ATTEMPTS
from turnout.stored.catalog import CatalogDoc, Owned
from turnout.vault import Vault

log = logging.getLogger("turnout.catalog")

FROM_FILE_ENV = CATALOG_FROM_FILE
"""Turned on (`1`, `true`, `yes`, `on`: `turnout.state.switches`) on a process, its file replaces the catalog
in Redis at start (rule 4)."""

Outcome = Literal["seeded", "applied", "forced", "kept"]


def merged(
    doc: CatalogDoc | None, file_doc: CatalogDoc, steps: Plan, sources: dict[str, str]
) -> tuple[CatalogDoc, dict[str, Owned]]:
    """`doc` (None: no catalog yet) with `steps` applied from the file's document `file_doc`, and
    the new ownership record (`sources`: `turnout.catalog.doc.file_entries` of the file).

    Entries are named `models.<id>` / `providers.<name>` (`turnout.catalog.ownership`).
    """
    doc = doc or CatalogDoc(providers={}, models={})
    models, providers = dict(doc.models), dict(doc.providers)
    for name in steps.remove:
        kind, _, entry = name.partition(".")
        (models if kind == "models" else providers).pop(entry, None)
    for name in steps.write:
        kind, _, entry = name.partition(".")
        if kind == "models":
            models[entry] = file_doc.models[entry]
        else:
            providers[entry] = file_doc.providers[entry]
    new = CatalogDoc(
        providers=providers,
        models=models,
        origin="api" if steps.kept else "file",
        file_digest=file_doc.file_digest,
    )
    prints = stored_entries(new)
    record = dict(steps.owned)
    record.update({name: Owned(written=prints[name], source=sources[name]) for name in steps.write})
    return new, record


def _plan(doc: CatalogDoc, owned: dict[str, Owned] | None, file: Config, *, force: bool) -> Plan:
    """The plan for `doc` in Redis (module rules); forced (rule 4) only when the file's own plan
    would leave something of Redis's: an admin edit kept, or an entry the file does not declare."""
    stored, sources = stored_entries(doc), file_entries(file)
    record = owned if owned is not None else legacy_record(stored, doc.origin == "file")
    steps = plan(stored, record, sources, same_entries(doc, file))
    if force and (steps.kept or set(stored) - set(sources)):
        return forced(stored, sources)
    return steps


async def seed(
    store: CatalogStore,
    file: Config,
    vault: Vault,
    *,
    force: bool = False,
    check: Callable[[CatalogDoc], object] | None = None,
) -> Outcome:
    """Apply the bootstrap rule for this process's `file`; log the admin edits kept over it.

    Args:
        check: validates a catalog before it is written (raises `ConfigError`; None: no check).

    Returns:
        What happened: `seeded` (rule 1), `applied` (entries written or removed), `forced`
        (rule 4), `kept` (nothing written).

    Raises:
        CatalogConflict: the catalog kept changing during the write.
        StateUnavailable: Redis is unreachable.
    """
    digest = file_digest(file)
    for _ in range(CAS_ATTEMPTS):
        doc, version = await store.load()
        owned = await store.owned()
        sources = file_entries(file)
        steps = Plan(write=tuple(sources)) if doc is None else _plan(doc, owned, file, force=force)
        new, record = merged(doc, doc_from_config(file, vault), steps, sources)
        if doc is not None:
            if steps.kept:
                _warn_kept(steps.kept, file.source)
            if not steps.changes and record == owned and doc.file_digest == digest:
                return "kept"
        if not _valid(new, check, file.source):
            return "kept"
        if await store.write(new, version, remember_file=digest, owned=record) is not None:
            outcome: Outcome = "seeded" if doc is None else "forced" if steps.forced else "applied"
            _log_applied(outcome, steps, file.source)
            return outcome
    raise CatalogConflict("the catalog kept changing while the file was applied; retry")


def _valid(doc: CatalogDoc, check: Callable[[CatalogDoc], object] | None, source: str) -> bool:
    if check is None:
        return True
    try:
        check(doc)
    except ConfigError as exc:
        log.error(
            "catalog: the models/providers of %s together with the admin edits kept in Redis break a rule (%s); "
            "Redis's catalog is left as it is. Fix the file, or start one process with %s=1 to replace the "
            "catalog with the file's.",
            source,
            exc,
            FROM_FILE_ENV,
        )
        return False
    return True


def _log_applied(outcome: Outcome, steps: Plan, source: str) -> None:
    written = ", ".join(steps.write) or "none"
    removed = f"; removed (no longer in the file): {', '.join(steps.remove)}" if steps.remove else ""
    log.info("catalog: %s from %s: wrote %s%s", outcome, source, written, removed)


def _warn_kept(kept: tuple[str, ...], source: str) -> None:
    log.warning(
        "catalog: kept the admin API's edits of %s over the values in %s (an edit through the admin API "
        "is newer than the file's). To replace them with the file's, start one process with %s=1.",
        ", ".join(kept),
        source,
        FROM_FILE_ENV,
    )
