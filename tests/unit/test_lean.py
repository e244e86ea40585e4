"""A server process defers `jwt` and leaves out httpx's CLI (`turnout_cli.lean`), and both still work."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from turnout_cli.lean import defer_unused_imports
defer_unused_imports()
import redis.asyncio, httpx, jwt
assert "cryptography.hazmat.bindings._rust" not in sys.modules, "redis imported the real jwt"
assert "rich" not in sys.modules and "pygments" not in sys.modules
assert callable(httpx.main)  # httpx's own fallback
token = jwt.encode({"a": 1}, "k" * 32, algorithm="HS256")  # the first read imports the real module
assert jwt.decode(token, "k" * 32, algorithms=["HS256"]) == {"a": 1}
assert type(sys.modules["jwt"]).__name__ == "module"
print("ok")
"""


def test_jwt_is_imported_at_first_use_and_works_then() -> None:
    # A fresh interpreter: this one has imported redis (and jwt) already.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
