"""The TypeScript client helper (`clients/typescript`) with the official `openai` and
`@anthropic-ai/sdk` npm packages, against a real fleet.

This test starts the fleet of `support.client_fleet` (the Python helper's), compiles the
package and its tests with `tsc`, and runs them with `node --test`, giving the fleet's
addresses in `TURNOUT_TEST_BASE_URL` and `TURNOUT_TEST_SIM_URL` and its keys in
`TURNOUT_TEST_KEY` and `TURNOUT_TEST_KEY_LAST`. The node tests are the Python helper's:
header parsing from the shared case table (`test/routing.test.ts`), the fetch wrapper under
both SDKs against a mock gateway (`test/fetch.test.ts`), and, against this fleet, routing
events on plain and streamed answers, the client-side chain after an exhausted gateway chain
(502, and an exhausted answer in the upstream's own status), and one Idempotency-Key across
an SDK retry (`test/fleet.test.ts`).

`scripts/ts-client` installs the packages (`npm ci`); without node the test skips saying so,
and in CI (`CI=true`) a missing install with node present is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.client_fleet import KEY, KEY_LAST, client_fleet
from support.gateway import Gateway

pytestmark = pytest.mark.integration

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
TSC = PACKAGE / "node_modules" / ".bin" / "tsc"
NODE_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    """Its own fleet (`support.client_fleet`), once the packages are known to be installed."""
    _require_install()
    yield from client_fleet()


def _require_install() -> None:
    """Skip (no node) or fail in CI (node, but `scripts/ts-client` has not installed the packages)."""
    if TSC.exists():
        return
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no node/npm on PATH: the TypeScript client helper is not installed (scripts/ts-client)")
    reason = f"{TSC} is missing: run scripts/ts-client (npm ci in clients/typescript)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _summary(tap: str, name: str) -> int:
    """A count of node's TAP summary (`# pass 12`), -1 when absent."""
    found = re.search(rf"^# {name} (\d+)$", tap, re.MULTILINE)
    return int(found.group(1)) if found else -1


def test_typescript_helper_passes_its_node_tests_against_the_fleet(gateway: Gateway) -> None:
    build = subprocess.run(
        [str(TSC), "-p", "tsconfig.test.json"], cwd=PACKAGE, capture_output=True, text=True, timeout=NODE_TIMEOUT_S
    )
    assert build.returncode == 0, f"tsc failed:\n{build.stdout}{build.stderr}"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "TURNOUT_TEST_BASE_URL": gateway.base_url,
        "TURNOUT_TEST_SIM_URL": gateway.sim_url,
        "TURNOUT_TEST_KEY": KEY,
        "TURNOUT_TEST_KEY_LAST": KEY_LAST,
    }
    run = subprocess.run(
        ["node", "--test", "--test-reporter=tap", "build/test/"],
        cwd=PACKAGE,
        env=env,
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
    )
    failed = "\n".join(line for line in run.stdout.splitlines() if line.lstrip().startswith("not ok"))
    assert run.returncode == 0, f"node tests failed:\n{failed}\n{run.stdout[-8000:]}{run.stderr[-2000:]}"
    assert _summary(run.stdout, "fail") == 0 and "# SKIP" not in run.stdout, run.stdout[-2000:]  # the fleet suite ran
    assert _summary(run.stdout, "pass") >= 39, run.stdout[-2000:]
