"""A worker catches up with the catalog a job was accepted on before planning it."""

from __future__ import annotations

from typing import Any

from turnout.catalog.live import LiveCatalog
from turnout.config import parse_config
from turnout.state.errors import StateUnavailable
from turnout_worker.app import _catch_up

CONFIG = parse_config(
    """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1"}
models:
  m: {offers: [{provider: a, model: m}]}
""",
    env={},
)


class Watch:
    """A catalog watch whose reads are counted (and may fail)."""

    def __init__(self, version: int, fail: bool = False) -> None:
        self.live = LiveCatalog(CONFIG)
        self.live.swap(CONFIG, version)
        self.reads = 0
        self.fail = fail

    async def refresh(self) -> bool:
        self.reads += 1
        if self.fail:
            raise StateUnavailable("down")
        return True


def as_watch(watch: Watch) -> Any:
    return watch


async def test_a_job_accepted_on_a_newer_catalog_makes_the_worker_read_it_first() -> None:
    watch = Watch(version=3)
    await _catch_up(as_watch(watch), 4)
    assert watch.reads == 1


async def test_a_job_on_the_same_or_an_older_catalog_reads_nothing() -> None:
    watch = Watch(version=3)
    for version in (0, 2, 3):
        await _catch_up(as_watch(watch), version)
    assert watch.reads == 0


async def test_an_unreachable_redis_leaves_the_catalog_in_force() -> None:
    watch = Watch(version=3, fail=True)
    await _catch_up(as_watch(watch), 9)
    assert watch.reads == 1 and watch.live.version == 3
