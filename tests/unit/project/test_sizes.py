"""Sizes as a test (issue: Architecture, item 7): small modules with one job each.

No source module (libs/, services/) over `MODULE_MAX` lines, no function over
`FUNCTION_MAX` lines (decorators and docstring included), no test module over
`TEST_MODULE_MAX` lines. A file that grows past a bound holds two ideas: split
it by idea (README, Architecture, "Where things go"), not by moving lines into helpers with
no meaning.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULE_MAX = 500
"""Lines a source module may hold."""
FUNCTION_MAX = 80
"""Lines a function or method may span, from its first decorator to its last line."""
TEST_MODULE_MAX = 800
"""Lines a test module may hold."""

SOURCE_FILES = sorted(
    p for p in [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")] if "node_modules" not in p.parts
)
TEST_FILES = sorted(p for p in (ROOT / "tests").rglob("*.py") if "node_modules" not in p.parts)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """The functions of `source` spanning more than `limit` lines, as (qualified name, lines)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    span = (child.end_lineno or child.lineno) - first + 1
                    if span > limit:
                        found.append((name, span))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_no_source_module_is_over_the_bound() -> None:
    over = {str(p.relative_to(ROOT)): n for p in SOURCE_FILES if (n := _lines(p)) > MODULE_MAX}
    assert over == {}, f"modules over {MODULE_MAX} lines (split them by idea): {over}"


def test_no_function_is_over_the_bound() -> None:
    over = {
        f"{p.relative_to(ROOT)}:{name}": span
        for p in SOURCE_FILES
        for name, span in long_functions(p.read_text(), FUNCTION_MAX)
    }
    assert over == {}, f"functions over {FUNCTION_MAX} lines (name their steps): {over}"


def test_no_test_module_is_over_the_bound() -> None:
    over = {str(p.relative_to(ROOT)): n for p in TEST_FILES if (n := _lines(p)) > TEST_MODULE_MAX}
    assert over == {}, f"test modules over {TEST_MODULE_MAX} lines (split them by what they test): {over}"


@pytest.mark.parametrize("span", [80, 81])
def test_the_function_check_counts_decorators_and_docstrings(span: int) -> None:
    body = "\n".join(["    x = 1"] * (span - 3))
    source = f'@decorator\ndef f():\n    """Doc."""\n{body}\n'
    assert long_functions(source, FUNCTION_MAX) == ([] if span <= FUNCTION_MAX else [("f", span)])


def test_the_function_check_finds_a_nested_method() -> None:
    body = "\n".join(["            x = 1"] * 90)
    source = f"class C:\n    def m(self):\n        def inner():\n{body}\n"
    assert [name for name, _ in long_functions(source, FUNCTION_MAX)] == ["C.m", "C.m.inner"]
