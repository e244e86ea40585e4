"""Import rules of the layout: the library never reaches into the services or the web stack."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "libs" / "turnout"
SERVICES = ("turnout_ingress", "turnout_worker", "turnout_sim", "turnout_cli")
WEB = ("fastapi", "starlette", "uvicorn")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


LIB_FILES = sorted(LIB.rglob("*.py"))


@pytest.mark.parametrize("path", LIB_FILES, ids=lambda p: str(p.relative_to(LIB)))
def test_library_never_imports_services_or_the_web_stack(path: Path) -> None:
    imported = _imports(path)
    assert not imported & set(SERVICES), f"{path} imports a service package"
    assert not imported & set(WEB), f"{path} imports the web stack"


@pytest.mark.parametrize("path", LIB_FILES, ids=lambda p: str(p.relative_to(LIB)))
def test_arq_stays_in_the_redis_edge(path: Path) -> None:
    if "arq" in _imports(path):
        assert path.parent.name == "state", f"{path} imports arq outside libs/turnout/state"


def test_the_library_has_modules_to_check() -> None:
    assert len(LIB_FILES) > 20


PACKAGES = ("tenancy", "observability", "streaming", "catalog")


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_face_resolves_every_name_it_lists(package: str) -> None:
    face = importlib.import_module(f"turnout.{package}")
    for name, module in face.FACE.items():
        home = importlib.import_module(f"turnout.{package}.{module}")
        assert getattr(face, name) is getattr(home, name)
    with pytest.raises(AttributeError):
        getattr(face, "no_such_name")


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_face_names_exactly_what_it_types(package: str) -> None:
    tree = ast.parse((LIB / package / "__init__.py").read_text())
    typed = {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(f"turnout.{package}.")
        for alias in node.names
    }
    face = importlib.import_module(f"turnout.{package}")
    assert typed == set(face.FACE)


def test_the_library_keeps_few_top_level_modules() -> None:
    top = sorted(p.stem for p in LIB.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 12, top
