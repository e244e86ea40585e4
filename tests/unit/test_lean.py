"""A server process defers `jwt` and leaves out httpx's CLI and uvicorn's file watcher
(`turnout_cli.lean`), and what imports them still works."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import sys
from turnout_cli.lean import defer_unused_imports
defer_unused_imports()
import redis.asyncio, httpx, jwt
assert "cryptography.hazmat.bindings._rust" not in sys.modules, "redis imported the real jwt"
assert "rich" not in sys.modules and "pygments" not in sys.modules
import uvicorn, uvicorn.supervisors
assert sys.modules["watchfiles"] is None and uvicorn.supervisors.ChangeReload.__name__ == "StatReload"
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


AT_REST = """
import sys
from turnout_cli.lean import defer_unused_imports
defer_unused_imports()
from turnout.config import parse_config
from turnout.settings import Settings
from turnout_ingress.app import create_app
config = parse_config('providers:\\n  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}\\n'
                      'models:\\n  m: {offers: [{provider: p, model: m}]}\\n', env={})
app = create_app(config, redis_url="redis://127.0.0.1:9", settings=Settings.from_env({}))
for unused in ("opentelemetry.sdk.trace", "opentelemetry.sdk.resources", "psutil", "jinja2"):
    assert unused not in sys.modules, unused
assert sys.modules["pydantic.v1"] is None  # FastAPI's check for v1 models took its fallback
telemetry = app.state.turnout.obs.telemetry
assert telemetry.tracing is None
with telemetry.tracer.start_as_current_span("x") as span:  # built at first use
    assert span.get_span_context().is_valid and not span.is_recording()
from turnout_ingress.ui import _environment
assert _environment().get_template("login.html") is not None and "jinja2" in sys.modules
print("ok")
"""


def test_an_ingress_at_rest_loads_neither_the_otel_sdk_nor_jinja2_nor_pydantic_v1() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TURNOUT_"))}
    done = subprocess.run(
        [sys.executable, "-c", AT_REST], capture_output=True, text=True, timeout=60, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
