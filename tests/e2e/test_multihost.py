"""The fleet across network namespaces: `bench/multihost/run.sh` (root only).

Runs only as root, with `ip` (iproute2) and redis-server available, and with
`TURNOUT_E2E_NETNS=1` set: the script creates network namespaces and a
bridge, which a developer's shell or a CI runner may not be allowed to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "multihost" / "run.sh"


def _skip_reason() -> str | None:
    if os.environ.get("TURNOUT_E2E_NETNS") != "1":
        return "set TURNOUT_E2E_NETNS=1 to run the network-namespace fleet (needs root and iproute2)"
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs `ip` from iproute2 (apt-get install -y iproute2)"
    if shutil.which("redis-server") is None:
        return "needs redis-server"
    return None


@pytest.mark.timeout(300)
def test_fleet_across_network_namespaces_survives_a_killed_worker() -> None:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    proc = subprocess.Popen(
        ["bash", str(SCRIPT)],
        env={**os.environ, "PYTHON": sys.executable, "REQUESTS": "50"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the script's trap stops its processes and removes its namespaces
        stdout, stderr = proc.communicate(timeout=40)
        pytest.fail(f"run.sh did not finish within 240 s:\n{stdout}\n{stderr}")
    print(stdout)
    print(stderr, file=sys.stderr)
    assert proc.returncode == 0, f"run.sh exited {proc.returncode}:\n{stdout}\n{stderr}"
    assert "50/50 ok" in stdout
    assert "[FAIL]" not in stdout
    assert stdout.count("[ok]") == 6
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not any(line.split()[0].startswith("tn-") for line in listed.splitlines() if line.strip()), listed
