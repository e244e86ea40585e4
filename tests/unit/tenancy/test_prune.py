"""What the configuration file removes from a stored org: what it wrote and no longer declares."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.config import KeyConfig, OrgConfig
from turnout.stored.orgs import Ceiling, KeyDoc, Meta, OrgDoc, SquadDoc
from turnout.tenancy.prune import prune, prune_undeclared

FILE = Meta(origin="config", applied="fp")
API = Meta(origin="api")


def key(name: str, meta: Meta, squad: str | None = None) -> KeyDoc:
    return KeyDoc(name=name, digest="d" + name, prefix="tk-" + name, squad=squad, meta=meta)


def test_an_org_the_file_created_goes_whole_once_the_file_no_longer_declares_it() -> None:
    demo = OrgDoc(id="demo", settings_meta=FILE, keys={"demo": key("demo", FILE), "mine": key("mine", API)})
    assert prune_undeclared(demo) == (None, ["org"])


def test_an_org_the_api_created_keeps_all_but_what_the_file_wrote() -> None:
    org = OrgDoc(
        id="acme",
        settings_meta=API,
        keys={"ci": key("ci", FILE), "own": key("own", API, squad="s")},
        squads={"s": SquadDoc(meta=FILE), "t": SquadDoc(meta=FILE)},
        ceilings={"keys.ci": Ceiling(), "org": Ceiling()},
    )
    new, removed = prune_undeclared(org)
    assert new is not None and set(new.keys) == {"own"} and set(new.squads) == {"s"}
    assert removed == ["keys.ci", "squads.t"] and set(new.ceilings) == {"org"}
    assert prune_undeclared(new) == (new, [])  # the next start removes nothing more


def test_a_declared_org_keeps_what_the_file_declares() -> None:
    org = OrgDoc(id="acme", settings_meta=FILE, keys={"ci": key("ci", FILE), "old": key("old", FILE)})
    new, removed = prune(org, OrgConfig(keys=[KeyConfig(name="ci", key="tk-ci-key-000000001")]))
    assert set(new.keys) == {"ci"} and removed == ["keys.old"]


NAMES = st.sampled_from(["a", "b", "c", "d"])
METAS = st.sampled_from([FILE, API])


@st.composite
def orgs(draw: st.DrawFn) -> OrgDoc:
    keys = draw(st.dictionaries(NAMES, METAS))
    squads = draw(st.dictionaries(NAMES, METAS))
    return OrgDoc(
        id="o",
        settings_meta=draw(METAS),
        keys={n: key(n, m, squad=draw(st.none() | st.sampled_from([*squads, "gone"]))) for n, m in keys.items()},
        squads={n: SquadDoc(meta=m) for n, m in squads.items()},
    )


@given(orgs(), st.none() | st.frozensets(NAMES))
def test_nothing_the_file_never_wrote_is_removed(org: OrgDoc, declared_keys: frozenset[str] | None) -> None:
    declared = (
        None
        if declared_keys is None
        else OrgConfig(keys=[KeyConfig(name=n, key=f"tk-{n}-declared-key-0001") for n in sorted(declared_keys)])
    )
    new, removed = prune(org, declared)
    for name, k in org.keys.items():
        assert (name in new.keys) == (k.meta.origin == "api" or name in (declared_keys or ()))
    for name, squad in org.squads.items():
        if squad.meta.origin == "api" or any(k.squad == name for k in new.keys.values()):
            assert name in new.squads
    assert sorted(removed) == sorted(
        [f"keys.{n}" for n in set(org.keys) - set(new.keys)]
        + [f"squads.{n}" for n in set(org.squads) - set(new.squads)]
    )
    if org.settings_meta.origin == "api":
        assert prune_undeclared(org)[0] is not None
