"""What a file owns in the catalog vs the stored copy: what a start writes, removes, keeps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnout.catalog.ownership import Plan, forced, legacy_record, plan
from turnout.stored.catalog import Owned

M = "models.m"


@pytest.mark.parametrize(
    ("stored", "owned", "file", "same", "expected"),
    [
        ({}, {}, {M: "f1"}, (), Plan(write=(M,))),  # a new entry is written
        ({M: "s1"}, {M: Owned(written="s1", source="f1")}, {M: "f1"}, (), "unchanged"),  # a restart writes nothing
        ({M: "s1"}, {M: Owned(written="s1", source="f1")}, {M: "f2"}, (), Plan(write=(M,))),  # new file
        ({M: "s1"}, {M: Owned(written="s1", source="f2")}, {M: "f1"}, (), Plan(write=(M,))),  # a rollback applies
        ({M: "s1"}, {M: Owned(written="s1", source="f1")}, {}, (), Plan(remove=(M,))),  # no longer declared
        ({M: "s9"}, {M: Owned(written="s1", source="f1")}, {M: "f2"}, (), "kept"),  # an API edit wins
        ({}, {M: Owned(written="s1", source="f1")}, {M: "f1"}, (), "kept"),  # an API delete wins
        ({M: "s9"}, {}, {M: "f1"}, (), "kept"),  # created through the API: never overwritten
        ({M: "s9"}, {}, {}, (), Plan()),  # ... nor removed
        ({M: "s9"}, {}, {M: "f1"}, (M,), "adopt"),  # the same as the file's: the file owns it from now on
        ({M: "s9"}, {M: Owned(written="s1", source="f1")}, {M: "f2"}, (M,), "adopt"),  # the file agrees with the edit
    ],
)
def test_each_entry_follows_its_owner(
    stored: dict[str, str], owned: dict[str, Owned], file: dict[str, str], same: tuple[str, ...], expected: object
) -> None:
    got = plan(stored, owned, file, frozenset(same))
    if expected == "unchanged":
        assert not got.changes and got.owned == owned and not got.kept
    elif expected == "kept":
        assert got.kept == (M,) and not got.changes
    elif expected == "adopt":
        assert got.adopt == (M,) and got.owned[M] == Owned(written=stored[M], source=file[M]) and not got.write
    else:
        assert got == expected


def test_the_api_owns_an_edited_entry_once_the_file_drops_it() -> None:
    got = plan({M: "s9"}, {M: Owned(written="s1", source="f1")}, {})
    assert got.kept == (M,) and M not in got.owned and not got.remove
    assert plan({M: "s9"}, got.owned, {}) == Plan()  # the next start leaves it alone, silently


def test_the_operator_may_ask_for_the_file_over_everything() -> None:
    got = forced({M: "s9", "models.x": "s2"}, {M: "f1"})
    assert got.write == (M,) and got.remove == ("models.x",) and got.forced


def test_a_catalog_from_before_the_record_is_the_files_when_a_file_wrote_it_last() -> None:
    assert legacy_record({M: "s1"}, True) == {M: Owned(written="s1")}
    assert legacy_record({M: "s1"}, False) == {}
    assert plan({M: "s1"}, legacy_record({M: "s1"}, True), {}).remove == (M,)  # the demo's models go


NAMES = st.sampled_from([f"models.m{i}" for i in range(4)] + [f"providers.p{i}" for i in range(3)])
PRINTS = st.sampled_from(["a", "b", "c"])


State = tuple[dict[str, str], dict[str, Owned], dict[str, str], Plan]


@st.composite
def states(draw: st.DrawFn) -> State:
    """Stored entries, an ownership record, the file's entries, and the plan of a start."""
    stored = draw(st.dictionaries(NAMES, PRINTS))
    owned = draw(st.dictionaries(NAMES, st.builds(Owned, written=PRINTS, source=PRINTS)))
    file = draw(st.dictionaries(NAMES, PRINTS))
    same = draw(
        st.frozensets(st.sampled_from(sorted(set(stored) & set(file))) if set(stored) & set(file) else st.nothing())
    )
    return stored, owned, file, plan(stored, owned, file, same)


@given(states())
def test_an_api_edit_is_never_overwritten_nor_removed_by_a_file(
    state: State,
) -> None:
    stored, owned, _file, got = state
    edited = {n for n, o in owned.items() if stored.get(n) != o.written}
    assert not edited & {*got.write, *got.remove}


@given(states())
def test_nothing_the_file_never_owned_is_removed_or_overwritten(
    state: State,
) -> None:
    stored, owned, _file, got = state
    foreign = set(stored) - set(owned)
    assert not foreign & {*got.write, *got.remove}


@given(states())
def test_what_the_file_owns_and_nobody_edited_ends_as_the_file_says(
    state: State,
) -> None:
    stored, owned, file, got = state
    for name, o in owned.items():
        if stored.get(name) != o.written:
            continue
        if name not in file:
            assert name not in got.owned and (name in got.remove or name not in stored)
        elif file[name] != o.source:
            assert name in got.write
        else:
            assert got.owned[name] == o  # unchanged: no write
    for name in file:  # every entry of the file is owned after the start, unless the API holds it
        assert name in got.write or name in got.owned or name in got.kept
    assert set(got.kept).isdisjoint({*got.write, *got.remove, *got.adopt})
