"""uvicorn is kept to a tested range: the ingress's HTTP guard subclasses its httptools protocol
(`turnout_ingress.guard.http`), which is not uvicorn's public API. CI runs the guard's tests on
each bound of the range (`scripts/uvicorn-check`); the lock pins a release inside it (test_lock.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]


def test_uvicorn_has_a_lower_and_an_upper_bound_and_ci_tests_them() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (uvicorn,) = [Requirement(d) for d in deps if Requirement(d).name == "uvicorn"]
    assert {s.operator for s in uvicorn.specifier} == {">=", "<"}, uvicorn
    assert "bash scripts/uvicorn-check" in (ROOT / ".ci" / "run").read_text()
