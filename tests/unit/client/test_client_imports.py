"""The client helper is installed on the caller's side: it never imports the server."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted((ROOT / "libs" / "turnout_client").rglob("*.py"))
SERVER = {"turnout", "turnout_ingress", "turnout_worker", "turnout_sim", "turnout_cli"}
ALLOWED_THIRD_PARTY = {"httpx", "httpx2", "opentelemetry"}


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_client_modules_import_only_the_stdlib_the_http_package_and_opentelemetry(path: Path) -> None:
    imported = _imported(path) - {"turnout_client", "__future__"}
    assert not imported & SERVER
    assert imported - set(sys.stdlib_module_names) <= ALLOWED_THIRD_PARTY


def test_importing_the_client_loads_no_server_module() -> None:
    code = f"import sys, turnout_client; print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(SERVER)!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
