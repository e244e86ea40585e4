"""Quiet exit when the reader of standard output goes away (`turnout … | head`).

Owns: turning a `BrokenPipeError` on stdout into the exit a shell tool
gives on SIGPIPE, without a traceback. Must not import: server code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

SIGPIPE_EXIT = 141
"""128 + SIGPIPE (13): what a shell reports for a pipeline stage killed by SIGPIPE."""


def closed_pipe_safe(run: Callable[[], int]) -> int:
    """Run `run`; when stdout's reader has gone, exit quietly with `SIGPIPE_EXIT`.

    Standard output is pointed at /dev/null afterwards, so the interpreter's
    own flush at exit cannot raise the same error again (the recipe in
    Python's `signal` module documentation, "Note on SIGPIPE").

    Returns:
        `run()`'s exit code, or 141 after a broken pipe.
    """
    try:
        code = run()
        sys.stdout.flush()  # a pipe closed under buffered output fails here, not at exit
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_EXIT
