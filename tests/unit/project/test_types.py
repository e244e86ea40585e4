"""`mypy --strict` (configured in pyproject.toml) holds for the library, the services and the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TEST_DIRS = sorted(
    str(d.relative_to(ROOT))
    for d in (ROOT / "tests").rglob("*")
    if d.is_dir() and any(d.glob("*.py")) and d.name != "__pycache__"
)
"""Every directory of test modules. Each is checked on its own, as pytest imports it: with the directory
itself on the path (`from driver import ...`), `tests` for `support`, and `bench` for the bench helpers;
each has its own `conftest` module."""


def _mypy(*args: str, extra_path: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYPYPATH": extra_path} if extra_path else None
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_mypy_strict_passes_on_libs_and_services() -> None:
    result = _mypy("libs", "services")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@pytest.mark.parametrize("directory", TEST_DIRS)
def test_mypy_strict_passes_on_the_tests(directory: str) -> None:
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / directory).glob("*.py"))
    result = _mypy(*files, extra_path=os.pathsep.join(["tests", directory, "bench"]))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_every_test_directory_is_checked() -> None:
    assert {"tests/unit", "tests/unit/core", "tests/integration", "tests/support"} <= set(TEST_DIRS)
