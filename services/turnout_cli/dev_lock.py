"""One `turnout dev` stack per data directory: a lock file held for the stack's life.

Two stacks started from one directory for one configuration would run two
redis-servers on one data directory (one append-only file written by both)
and, for the demo, rewrite each other's `.turnout/demo.yaml` (the simulator
port in it). The second is refused before it starts anything, naming the
first's pid. The lock is `fcntl.flock` on `dev-<data directory's name>.lock`
beside it (`.turnout/dev-redis-demo.lock`): the kernel drops it when the holding process ends, however it ends, so a crash
leaves no stale lock to clean up. Children do not inherit it
(`subprocess.Popen` closes other descriptors).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


class StackBusy(Exception):
    """Another process holds the stack's lock; the message names it and what to do."""


def hold(data: Path, what: str) -> IO[str]:
    """Lock the stack whose Redis keeps (or would keep) its data in `data` (a path; it need not exist
    yet); `what` names that stack in the refusal (`the demo stack of this directory`).

    Returns:
        The open lock file, holding the lock: keep it open while the stack
        runs (closing it, or the process ending, releases the lock).

    Raises:
        StackBusy: another process holds the lock (its pid, as it wrote it, in the message).
        OSError: the lock file cannot be opened (an unwritable `.turnout`).
    """
    handle = data.with_name(f"dev-{data.name}.lock").open("a+", encoding="ascii")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()[:20] or "unknown"
        handle.close()
        raise StackBusy(
            f"another `turnout dev` (pid {holder}) is running {what}; "
            "stop it first, or start this one from another directory"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
