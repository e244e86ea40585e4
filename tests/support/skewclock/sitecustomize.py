"""Test support: a process whose wall clock is off by `TURNOUT_TEST_SKEW_S` seconds.

Put this directory on `PYTHONPATH` of a child process (a worker) and set
`TURNOUT_TEST_SKEW_S` (float seconds, negative: behind): Python imports this
module at start, before any project code, and shifts `time.time` and
`time.time_ns` (the wall clock every epoch deadline is read from) by that
much. `time.monotonic` is left alone, as a host's clock drift would.
"""

import os
import time

_skew_s = float(os.environ.get("TURNOUT_TEST_SKEW_S") or 0)
if _skew_s:
    _wall_s, _wall_ns = time.time, time.time_ns
    time.time = lambda: _wall_s() + _skew_s
    time.time_ns = lambda: _wall_ns() + int(_skew_s * 1e9)
