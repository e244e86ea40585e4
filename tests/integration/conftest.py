"""Integration fixtures: a real redis-server, simulator, ingress and worker.

In CI (`CI=true`) a missing redis-server is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from support.gateway import CONFIG, KEY, KEY_DEADLINE, KEY_REROUTE, KEY_WORKED, Gateway
from support.procs import Fleet


def _require_redis() -> None:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is required in CI (apt-get install -y redis-server)")
        pytest.skip("redis-server not installed")


@pytest.fixture(scope="session")
def gateway() -> Iterator[Gateway]:
    """Redis + simulator + ingress + one worker, for the whole session."""
    _require_redis()
    fleet = Fleet()
    try:
        _, redis_url = fleet.redis()
        _, sim_url = fleet.sim()
        config_path = fleet.workdir / "turnout.yaml"
        config_path.write_text(CONFIG.format(
            sim=sim_url, key=KEY, key_worked=KEY_WORKED, key_deadline=KEY_DEADLINE, key_reroute=KEY_REROUTE,
        ))
        fleet.worker(config_path, redis_url)
        _, base = fleet.ingress(config_path, redis_url)
        gw = Gateway(base_url=base, sim_url=sim_url, redis_url=redis_url, fleet=fleet)
        yield gw
        gw.close()
    finally:
        fleet.stop_all()
