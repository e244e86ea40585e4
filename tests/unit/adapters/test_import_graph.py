"""The adapters' import graph has no cycles and no function-local imports.

Every import of a module under `libs/turnout/adapters` is read from its
source (those under `if TYPE_CHECKING:` excluded: they never run), and the
graph of `turnout.adapters` modules must be acyclic, so each module can be
imported on its own.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ADAPTERS = ROOT / "libs" / "turnout" / "adapters"
MODULES = sorted(f"turnout.adapters.{p.stem}" for p in ADAPTERS.glob("*.py") if p.stem != "__init__")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                pending.extend(handler.body)
    return found


def _adapter_imports(module: str) -> set[str]:
    path = ADAPTERS / f"{module.rsplit('.', 1)[1]}.py"
    imported: set[str] = set()
    for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if isinstance(node, ast.ImportFrom) and node.module == "turnout.adapters":
            names = [f"turnout.adapters.{a.name}" for a in node.names]
        imported.update(n for n in names if n in MODULES)
    return imported


def test_adapter_modules_form_no_import_cycle() -> None:
    graph = {module: _adapter_imports(module) for module in MODULES}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"import cycle among adapters: {' -> '.join(exc.args[1])}")
    assert set(order) == set(MODULES)


@pytest.mark.parametrize("path", sorted(ADAPTERS.glob("*.py")), ids=lambda p: p.name)
def test_adapter_module_imports_only_at_module_level(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    local = [
        f"{path.name}:{inner.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for inner in ast.walk(node)
        if isinstance(inner, (ast.Import, ast.ImportFrom))
    ]
    assert not local, f"function-local imports (a hidden cycle?): {local}"


@pytest.mark.parametrize("module", MODULES)
def test_adapter_module_imports_on_its_own(module: str) -> None:
    code = f"import importlib; importlib.import_module({module!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_every_adapter_module_is_checked() -> None:
    assert "turnout.adapters.base" in MODULES and "turnout.adapters.exchange" in MODULES
    assert all(importlib.util.find_spec(m) is not None for m in MODULES)
