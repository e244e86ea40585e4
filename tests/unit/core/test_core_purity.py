"""Architecture test: the core is pure (STYLE.md "Pure core, imperative shell").

`libs/turnout/core/*.py` may import only the standard library, msgspec and
`turnout.core` itself, and none of the standard-library modules that do I/O,
read a clock or run an event loop. `random` may be imported only for the
`random.Random` type: randomness is an injected `random.Random`, never the
module-level generator.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CORE_DIR = Path(__file__).resolve().parents[3] / "libs" / "turnout" / "core"
CORE_FILES = sorted(CORE_DIR.glob("*.py"))

THIRD_PARTY_ALLOWED = frozenset({"msgspec"})
# Standard-library modules that bring I/O, a clock, global randomness or asyncio.
STDLIB_FORBIDDEN = frozenset(
    {
        "asyncio",
        "concurrent",
        "http",
        "io",
        "logging",
        "multiprocessing",
        "os",
        "pathlib",
        "secrets",
        "select",
        "selectors",
        "shutil",
        "socket",
        "sqlite3",
        "ssl",
        "subprocess",
        "tempfile",
        "threading",
        "time",
        "urllib",
        "uuid",
    }
)
CLOCK_CALLS = frozenset({"now", "utcnow", "today", "monotonic", "perf_counter"})


def _imported_modules(tree: ast.AST) -> list[tuple[str, int]]:
    """(absolute module name or '.'-prefixed relative name, line) per import."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), node.lineno))
    return found


def _violation(module: str) -> str | None:
    if module.startswith("."):
        stripped = module.lstrip(".")
        if len(module) - len(stripped) > 1:
            return "relative import leaves turnout.core"
        return None
    top = module.split(".")[0]
    if top == "turnout":
        if module == "turnout.core" or module.startswith("turnout.core."):
            return None
        return "imports turnout outside turnout.core"
    if top in THIRD_PARTY_ALLOWED:
        return None
    if top not in sys.stdlib_module_names:
        return "third-party import"
    if top in STDLIB_FORBIDDEN:
        return "stdlib module with I/O, clock, randomness or asyncio"
    return None


def test_core_directory_has_modules() -> None:
    assert CORE_FILES, f"no modules found under {CORE_DIR}"


@pytest.mark.parametrize("path", CORE_FILES, ids=[p.name for p in CORE_FILES])
def test_core_module_imports_only_stdlib_msgspec_and_core(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    problems = [
        f"{path.name}:{line}: {module}: {why}"
        for module, line in _imported_modules(tree)
        if (why := _violation(module)) is not None
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", CORE_FILES, ids=[p.name for p in CORE_FILES])
def test_core_module_reads_no_clock(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    calls = [
        f"{path.name}:{node.lineno}: .{node.func.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_CALLS
    ]
    assert not calls, "\n".join(calls)


@pytest.mark.parametrize("path", CORE_FILES, ids=[p.name for p in CORE_FILES])
def test_core_module_uses_random_only_as_injected_type(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    uses = [
        f"{path.name}:{node.lineno}: random.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "random"
        and node.attr != "Random"
    ]
    uses += [
        f"{path.name}:{node.lineno}: from random import {alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "random" and node.level == 0
        for alias in node.names
        if alias.name != "Random"
    ]
    assert not uses, "\n".join(uses)


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("re", True),
        ("email.utils", True),
        ("msgspec", True),
        ("turnout.core.types", True),
        (".types", True),
        ("..state", False),
        ("turnout.adapters", False),
        ("httpx", False),
        ("asyncio", False),
        ("random", True),
        ("secrets", False),
        ("time", False),
    ],
    ids=lambda v: str(v),
)
def test_purity_rule_itself(module: str, allowed: bool) -> None:
    assert (_violation(module) is None) is allowed
