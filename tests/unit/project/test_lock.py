"""The dependency locks are current with pyproject.toml (`scripts/lock` writes them).

Offline: each lock's fingerprint of the declared dependency lists must match
pyproject.toml as it is now, and every declared requirement must be pinned
in the lock at a version it allows, with hashes.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]


def _lock_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("turnout_lock_script", str(ROOT / "scripts" / "lock"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


LOCK = _lock_script()
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def _pins(text: str) -> dict[str, str]:
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


@pytest.mark.parametrize("name", sorted(LOCK.LOCKS))
def test_lock_fingerprint_matches_pyproject(name: str) -> None:
    text = (ROOT / name).read_text()
    first = text.splitlines()[0]
    expected = LOCK.fingerprint(ROOT / "pyproject.toml", LOCK.extras_of(name))
    assert first == f"# pyproject-fingerprint: {expected}", f"{name} is stale: run `python3 scripts/lock`"


@pytest.mark.parametrize("name", sorted(LOCK.LOCKS))
def test_lock_pins_every_declared_requirement_with_hashes(name: str) -> None:
    text = (ROOT / name).read_text()
    pins = _pins(text)
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = [*data["build-system"]["requires"], *data["project"]["dependencies"]]
    for extra in LOCK.extras_of(name):
        declared += data["project"]["optional-dependencies"][extra]
    for line in declared:
        requirement = Requirement(line)
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{requirement.name} is not in {name}"
        assert requirement.specifier.contains(pinned, prereleases=True), f"{requirement.name}=={pinned} vs {line}"
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n\n", 1)[-1] if "\n\n" in text else text)
    for block in blocks:
        if PIN.match(block):
            assert "--hash=sha256:" in block, f"no hash for {block.splitlines()[0]}"


def test_lock_dev_holds_the_runtime_lock_at_the_same_versions() -> None:
    runtime = _pins((ROOT / "requirements.lock").read_text())
    dev = _pins((ROOT / "requirements-dev.lock").read_text())
    assert {k: dev.get(k) for k in runtime} == runtime
