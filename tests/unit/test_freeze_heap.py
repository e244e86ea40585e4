"""`freeze_startup_heap`: what is alive when it runs is frozen, garbage first collected, and
objects made later are still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from turnout.runtime import freeze_startup_heap


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process goes on collecting everything


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_what_lives_is_frozen_and_garbage_is_collected_first() -> None:
    kept = _Node()
    dropped = _Node()
    dropped_ref = weakref.ref(dropped)
    del dropped  # garbage in a cycle: the freeze must not keep it
    frozen = freeze_startup_heap()
    assert frozen == gc.get_freeze_count() > 1_000  # the test process's own modules, at least
    assert dropped_ref() is None
    assert not any(o is kept for o in gc.get_objects())  # out of every generation the collector walks


def test_a_cycle_made_after_the_freeze_is_still_collected() -> None:
    freeze_startup_heap()
    later = _Node()
    assert any(o is later for o in gc.get_objects())
    later_ref = weakref.ref(later)
    del later
    gc.collect()
    assert later_ref() is None
