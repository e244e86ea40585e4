"""Server processes run under Python's `-OO` (issue: Performance, memory).

Owns: the start-up re-exec of `turnout ingress` and `turnout worker` into an
interpreter with the wanted optimization level (`TURNOUT_PYTHON_OPTIMIZE`,
`turnout.settings.Settings.python_optimize`, default 2).

Why: a server never reads a docstring or needs an `assert` to decide
anything (Turnout's own asserts only narrow types for the checker; its
behaviour never rests on them), yet every docstring of every module it
imports stays in memory as a code object constant. At `-OO` the ingress is
3.1 MiB smaller at rest and the worker 2.3 MiB (bench/README.md, "Memory").
`-O` alone saves nothing measurable.

How: `os.execv` of the same interpreter with the same command line and the
missing `-O` flags, so the process keeps its PID (supervisors, `kill`, and
the fleet's health checks see one process), its environment and its
arguments. Python writes `.opt-2.pyc` files beside the plain ones; an image
with a read-only root filesystem compiles them at build time (Dockerfile).
`TURNOUT_PYTHON_OPTIMIZE=0` keeps docstrings and asserts (debugging).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def reexec_argv(orig_argv: Sequence[str], executable: str, current: int, wanted: int) -> list[str] | None:
    """The command line to exec for optimization level `wanted`, or None when none is needed.

    Args:
        orig_argv: the interpreter's own command line (`sys.orig_argv`: the
            interpreter, its flags, then the script or `-m module` and its
            arguments).
        executable: the interpreter's path (`sys.executable`); empty when unknown.
        current: the running optimization level (`sys.flags.optimize`).
        wanted: the level asked for (0, 1 or 2).

    Returns:
        `[executable, "-O" * (wanted - current) as separate flags, *orig_argv[1:]]`,
        so the new interpreter runs at exactly `wanted`; None when `current`
        is already `wanted` or above, or the command line is unknown.
    """
    if wanted <= current or not executable or len(orig_argv) < 2:
        return None
    return [executable, *(["-O"] * (wanted - current)), *orig_argv[1:]]


def reexec_optimized(wanted: int) -> None:
    """Replace this process with the same command at optimization level `wanted` (module doc).

    Returns only when no re-exec is needed (`reexec_argv` gave None) or the
    exec failed (reported on stderr; the process then goes on unoptimized).
    """
    argv = reexec_argv(getattr(sys, "orig_argv", []), sys.executable, sys.flags.optimize, wanted)
    if argv is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        print(f"turnout: could not restart under -O ({exc}); going on without it", file=sys.stderr)
