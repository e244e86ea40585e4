"""Bench-only: a worker started with `TURNOUT_MEMTRACE_DIR` tells what its live objects are.

Put this folder on a child's `PYTHONPATH` (`bench/worker_memory.py` does): in a process whose
command line names `worker`, each `SIGUSR2` runs `gc.collect()` and writes
`$TURNOUT_MEMTRACE_DIR/census-<n>.json`: per type (module and name), how many objects the
collector tracks and their shallow size in bytes (`sys.getsizeof`), then `census-<n>.done`.
Nothing runs between signals (tracemalloc slowed a loaded worker past its clients' timeouts).
Never used by Turnout itself.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType

_DIR = os.environ.get("TURNOUT_MEMTRACE_DIR")
_COUNTER = itertools.count()


def _census(signum: int, frame: FrameType | None) -> None:
    n = next(_COUNTER)
    gc.collect()
    counts: dict[str, list[int]] = {}
    for obj in gc.get_objects():
        kind = type(obj)
        name = f"{kind.__module__}.{kind.__qualname__}"
        held = counts.setdefault(name, [0, 0])
        held[0] += 1
        held[1] += sys.getsizeof(obj, 0)
    path = Path(str(_DIR)) / f"census-{n}.json"
    path.write_text(json.dumps(counts))
    path.with_suffix(".done").write_text("ok")


if _DIR and "worker" in sys.argv:
    signal.signal(signal.SIGUSR2, _census)
