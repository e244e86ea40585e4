"""`mypy --strict` (configured in pyproject.toml) holds for the library and the services."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_strict_passes_on_libs_and_services() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "libs", "services"], cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
