"""Import rules of the layout: the library never reaches into the services or the web stack."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
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


def _module_graph() -> dict[str, set[str]]:
    """Every project module -> the project modules it imports (any import statement: module level,
    `TYPE_CHECKING`, function-local). A module's own parent packages are left out: Python imports
    them first anyway."""
    files: dict[str, Path] = {}
    for base in (ROOT / "libs", ROOT / "services"):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(up + ([source] if source else []))
                targets += [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
        found = {known(t) for t in targets}
        graph[module] = {t for t in found if t and t != module and not module.startswith(t + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    graph = _module_graph()
    assert "turnout_ingress.state" in graph and "turnout.runtime" in graph
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _package_graph() -> dict[str, set[str]]:
    """Each package of the library (and each top-level module) -> the others its modules import."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, targets in _module_graph().items():
        if module.startswith("turnout."):
            own = package(module)
            found = {package(t) for t in targets if t.startswith("turnout.")} - {own}
            graph.setdefault(own, set()).update(found)
            for target in found:
                graph.setdefault(target, set())
    return graph


def test_no_package_cycles() -> None:
    """No package of the library imports, through any chain, a package that imports it: the
    documents the state edge stores are in the leaf `turnout.stored` (not in the wings that give
    them meaning), the vault is the leaf `turnout.vault`, the router's bookkeeping scope is the
    router's (the observability wing imports the router, never the reverse), and a process's
    parts are wired to each other where it is composed (`turnout.runtime`)."""
    graph = _package_graph()
    assert "turnout.state" in graph and "turnout.router" in graph
    assert _cycles(graph) == []


def test_the_leaves_import_only_what_is_below_them() -> None:
    """The configuration's rules, the vault and the stored documents sit below every wing."""
    graph = _package_graph()
    assert graph["turnout.rules"] <= {"turnout.errors", "turnout.scrub", "turnout.core"}, graph["turnout.rules"]
    assert graph["turnout.vault"] == set(), graph["turnout.vault"]
    assert graph["turnout.stored"] <= {"turnout.core", "turnout.config", "turnout.vault"}, graph["turnout.stored"]


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "libs").rglob("*.py")) + sorted((ROOT / "services").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_redis_errors_are_mapped_only_in_the_state_edge(path: Path) -> None:
    if path.parent != LIB / "state":
        assert "RedisError" not in path.read_text(), f"{path}: catch StateUnavailable (turnout.state.errors)"


def test_the_library_keeps_few_top_level_modules() -> None:
    top = sorted(p.stem for p in LIB.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 12, top


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by their base name: two `test_x.py` in one run fail collection."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


OWN_PACKAGES = frozenset({"turnout", "turnout_client", *SERVICES, "support", "driver", "conftest"})
SOURCE_FILES = sorted([*LIB.parent.rglob("*.py"), *(ROOT / "services").rglob("*.py")])


def _private_imports(path: Path) -> list[str]:
    """`pkg._module` or `from pkg import _name` of a package not the project's own."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            pairs = [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            pairs = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in pairs:
            if module.split(".")[0] in OWN_PACKAGES or module == "__future__":
                continue
            if any(part.startswith("_") for part in module.split(".")) or name.startswith("_"):
                found.append(f"{module}{'.' + name if name else ''}")
    return found


@pytest.mark.parametrize("path", SOURCE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_module_or_name_of_another_package_is_imported(path: Path) -> None:
    """A library is used through its public API only (`pkg._module`, `from pkg import _name`
    break on its next release); the project's own packages may import their private names."""
    assert not _private_imports(path), f"{path}: private import of another package"


def test_the_private_import_check_finds_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from httpx_sse._decoders import SSEDecoder\nfrom starlette import _utils\nimport msgspec\n")
    assert _private_imports(sample) == ["httpx_sse._decoders.SSEDecoder", "starlette._utils"]


INGRESS = ROOT / "services" / "turnout_ingress"


def test_the_ingress_keeps_few_top_level_modules() -> None:
    """The ingress's top level is its composition and a few shared modules; the rest is grouped
    by concern (`serving/`, `surfaces/`, `limits/`, `guard/`, `admin/`, `ui/`)."""
    top = sorted(p.stem for p in INGRESS.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 8, top


@pytest.mark.parametrize("group", ["guard", "limits", "serving", "surfaces", "surfaces/messages", "surfaces/responses"])
def test_an_ingress_group_imports_nothing_on_its_own(group: str) -> None:
    """Importing one module of a group does not import the group's other modules (so a shared
    module, e.g. `errors`, may use one without a cycle through the group's package)."""
    tree = ast.parse((INGRESS / group / "__init__.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_the_unit_test_folders_mirror_the_source_packages() -> None:
    """`tests/unit/<x>/` tests the source package `<x>`: a package of the library, a service (named
    without `turnout_`) or the client; `project` checks the whole tree, `bench` the benchmarks'
    helpers. Tests of the library's top-level modules sit in `tests/unit/` itself."""
    packages = {p.name for p in LIB.iterdir() if (p / "__init__.py").exists()}
    services = {s.removeprefix("turnout_") for s in SERVICES}
    unit = ROOT / "tests" / "unit"
    folders = {p.name for p in unit.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders - (packages | services | {"client", "project", "bench"}) == set()
