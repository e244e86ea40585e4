"""`turnout … | head`: a reader that leaves early ends the command quietly (exit 141, no traceback)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from turnout_cli.pipes import closed_pipe_safe

def run() -> int:
    for i in range(200_000):
        print(f"line {i}")
    return 0

sys.exit(closed_pipe_safe(run))
"""


def test_a_closed_stdout_pipe_exits_141_without_a_traceback() -> None:
    with subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"line 0\n"
        proc.stdout.close()  # what `head -1` does after its line
        stderr = proc.stderr.read()
        assert proc.wait(timeout=30) == 141
    assert b"Traceback" not in stderr and b"BrokenPipeError" not in stderr


def test_an_open_pipe_keeps_the_commands_exit_code() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("200_000", "3").replace("return 0", "return 4")],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 4 and done.stdout.count(b"\n") == 3 and not done.stderr
