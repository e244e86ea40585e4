"""arq is used through its public API only (issue 42): no module references an arq name starting with `_`.

A name is arq's when it is imported from arq (or reached through `arq.`): no `from arq.x import _y`,
no `Name._y` or `arq.x._y` on such a name, and no class built on an arq class that defines or
reaches a private name of its own (`def _y`, `self._y`: arq's undocumented control flow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted((ROOT / "libs").rglob("*.py")) + sorted((ROOT / "services").rglob("*.py"))


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def arq_private_references(source: str) -> list[str]:
    """Each reference of `source` to a private arq name, as `line: text`."""
    tree = ast.parse(source)
    arq_names: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "arq":
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                arq_names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "arq":
                    arq_names.add((alias.asname or alias.name).split(".")[0])
                    if any(part.startswith("_") for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and _root_name(node.value) in arq_names:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.ClassDef) and any(_root_name(base) in arq_names for base in node.bases):
            for inner in ast.walk(node):
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef) and inner.name.startswith("_"):
                    if not inner.name.startswith("__"):
                        found.append(f"{inner.lineno}: {node.name}.{inner.name} overrides or adds a private method")
                elif (
                    isinstance(inner, ast.Attribute)
                    and inner.attr.startswith("_")
                    and not inner.attr.startswith("__")
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id == "self"
                ):
                    found.append(f"{inner.lineno}: {node.name} reaches self.{inner.attr}")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_references_a_private_arq_name(path: Path) -> None:
    assert arq_private_references(path.read_text()) == []


OLD_PICKUP = """
from arq.worker import Worker
import arq.constants as c

class PushWorker(Worker):
    async def _poll_iteration(self) -> None:
        await super()._poll_iteration()

    def _ended(self) -> None:
        self._release_sem_dec_counter_on_complete()

x = c._private
"""


def test_the_check_finds_what_the_subclass_of_arqs_worker_did() -> None:
    found = arq_private_references(OLD_PICKUP)
    assert any("_poll_iteration" in f for f in found)
    assert any("_release_sem_dec_counter_on_complete" in f for f in found)
    assert any("c._private" in f for f in found)
    assert arq_private_references("from arq.worker import _x\n") == ["1: from arq.worker import _x"]


def test_there_are_modules_to_check() -> None:
    assert len(FILES) > 100
