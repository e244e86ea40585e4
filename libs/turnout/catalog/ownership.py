"""What a configuration file owns in the catalog, and what a start does with each entry.

Owns: the pure decision, per catalog entry (`models.<id>`, `providers.<name>`),
between three versions of it — the entry in Redis, the entry the file wrote
there last (its ownership record, `Owned`), and the entry the file declares
now:

1. owned by the file and untouched since it wrote it: the file is the
   source of truth — written when the file's value differs from the one it
   wrote (a new file, or a rollback to an earlier one), removed when the file
   no longer declares it;
2. owned by the file but edited or deleted through the admin API since: the
   API edit is kept and named (`kept`) until the file declares the same value
   (then the file owns it again); once the file no longer declares the entry,
   it is the API's alone (no longer owned);
3. not owned by the file (created through the admin API): never removed or
   overwritten; the file's entry of the same name is adopted when it is the
   same, else the API's is kept and named;
4. absent from Redis and never owned: written from the file.

The state edge (`turnout.catalog.seed`) computes the fingerprints and applies
the plan in one compare-and-set. Must not import: services, FastAPI, arq,
httpx, Redis.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from turnout.stored.catalog import Owned


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """What a start does (module rules), entry names sorted.

    Attributes:
        write: entries written from the file.
        remove: entries removed (the file wrote them and declares them no more).
        kept: entries the admin API edited (or created) that differ from the file: left as they are.
        adopt: entries in Redis equal to the file's, not owned before: owned from now on.
        owned: the ownership record after the start, for the entries not written (written entries
            get theirs once the entry is built).
        forced: the operator asked for the file (`forced`).
    """

    write: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    adopt: tuple[str, ...] = ()
    owned: dict[str, Owned] = {}
    forced: bool = False

    @property
    def changes(self) -> bool:
        """True when Redis's catalog or its ownership record changes."""
        return bool(self.write or self.remove or self.adopt)


def plan(
    stored: Mapping[str, str],
    owned: Mapping[str, Owned],
    file: Mapping[str, str],
    same: frozenset[str] = frozenset(),
) -> Plan:
    """Decide each entry (module rules 1–4).

    Args:
        stored: entry -> fingerprint of the entry in Redis.
        owned: the ownership record (entry -> `Owned`).
        file: entry -> fingerprint of the file's value.
        same: entries whose stored value is the file's value (adopted when not owned).

    Returns:
        The `Plan`. Invariants (tests/unit/catalog/test_ownership.py): an entry edited through
        the API since the file wrote it is never written or removed; an entry the file never
        owned is never removed nor overwritten.
    """
    write: list[str] = []
    remove: list[str] = []
    kept: list[str] = []
    adopt: list[str] = []
    record: dict[str, Owned] = {}
    for name in sorted({*stored, *owned, *file}):
        s, o, f = stored.get(name), owned.get(name), file.get(name)
        if o is not None and s != o.written:  # rule 2: edited or deleted through the API
            if f is not None and s is not None and name in same:  # the file agrees with the edit now
                adopt.append(name)
                record[name] = Owned(written=s, source=f)
            elif f is not None:
                record[name] = o
                kept.append(name)
            elif s is not None:
                kept.append(name)
        elif o is not None:  # rule 1
            if f is None:
                if s is not None:
                    remove.append(name)
            elif f != o.source:
                write.append(name)
            else:
                record[name] = o
        elif f is None:  # rule 3: the API's alone
            continue
        elif s is None:  # rule 4
            write.append(name)
        elif name in same:
            adopt.append(name)
            record[name] = Owned(written=s, source=f)
        else:
            kept.append(name)
    return Plan(write=tuple(write), remove=tuple(remove), kept=tuple(kept), adopt=tuple(adopt), owned=record)


def forced(stored: Mapping[str, str], file: Mapping[str, str]) -> Plan:
    """The plan when the operator asks for the file (`TURNOUT_CATALOG_FROM_FILE=1`): every entry
    of the file written, every other entry removed, admin edits included."""
    return Plan(write=tuple(sorted(file)), remove=tuple(sorted(set(stored) - set(file))), forced=True)


def legacy_record(stored: Mapping[str, str], written_by_file: bool) -> dict[str, Owned]:
    """The ownership record of a catalog written before records existed: every entry when a file
    wrote it last (`written_by_file`), so the file in force now takes them over; else none."""
    return {name: Owned(written=fp) for name, fp in stored.items()} if written_by_file else {}
