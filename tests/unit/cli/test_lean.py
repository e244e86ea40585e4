"""A server process leaves out httpx's CLI, uvicorn's file watcher and pydantic.v1
(`turnout_cli.lean`), and what imports them still works; redis-py loads no PyJWT."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import sys
import turnout_cli.main  # what `turnout ingress` / `turnout worker` import first (redis among it)
from turnout_cli.lean import leave_out_unused_imports
leave_out_unused_imports()
import redis.asyncio, httpx
assert "jwt" not in sys.modules, "redis-py imported PyJWT (redis 5.3 and later do: pyproject.toml keeps it below)"
assert "cryptography.hazmat.bindings._rust" not in sys.modules, "something loaded cryptography's OpenSSL bindings"
assert "rich" not in sys.modules and "pygments" not in sys.modules
import uvicorn, uvicorn.supervisors
assert sys.modules["watchfiles"] is None and uvicorn.supervisors.ChangeReload.__name__ == "StatReload"
assert callable(httpx.main)  # httpx's own fallback
print("ok")
"""


def test_a_server_process_loads_neither_pyjwt_nor_httpx_cli_nor_the_file_watcher() -> None:
    # A fresh interpreter: this one has imported much of it already.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


AT_REST = """
import sys
import turnout_cli.main
from turnout_cli.lean import leave_out_unused_imports
leave_out_unused_imports()
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
from turnout_ingress.ui.render import _environment
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
