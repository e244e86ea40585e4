"""Integration fixtures: a real redis-server, simulator, ingress and worker.

In CI (`CI=true`) a missing redis-server is a failure, not a skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.gateway import (
    CONFIG,
    KEY,
    KEY_ADMIN,
    KEY_CYCLES,
    KEY_DEADLINE,
    KEY_RECOVER,
    KEY_REROUTE,
    KEY_STREAM,
    KEY_WORKED,
    OPERATOR,
    Gateway,
    start_gateway,
)
from support.procs import Fleet, require_redis


@pytest.fixture(scope="session")
def gateway() -> Iterator[Gateway]:
    """Redis + simulator + ingress + one worker, for the whole session."""
    require_redis()
    fleet = Fleet()
    try:
        gw = start_gateway(
            fleet,
            CONFIG,
            key=KEY,
            key_worked=KEY_WORKED,
            key_deadline=KEY_DEADLINE,
            key_reroute=KEY_REROUTE,
            key_admin=KEY_ADMIN,
            key_stream=KEY_STREAM,
            key_cycles=KEY_CYCLES,
            key_recover=KEY_RECOVER,
            env={"TURNOUT_OPERATOR_KEY": OPERATOR},
        )
        yield gw
        gw.close()
    finally:
        fleet.stop_all()
