"""The documentation site: README.md for a newcomer, one page per topic in `docs/`, built with
`mkdocs build --strict` (every page in the nav, every link resolving)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from support.docs import README, ROOT, nav_files

NEWCOMER = ["## Quick start", "## Tests", "## A first configuration", "## Response headers", "## Error codes"]
"""What README holds itself: the two commands, a first file, the headers and the error codes."""


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(nav_files()) == sorted([*pages, "index.md"])  # index.md: README, made by the hook


def test_the_sites_home_page_is_readme_with_its_links_made_relative_to_the_site() -> None:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = "see [Reliability](docs/routing.md#reliability); pages in [`docs/`](docs/)"
    assert hooks.home_page(text) == "see [Reliability](routing.md#reliability); pages in `docs/`"


def test_readme_holds_what_a_newcomer_needs_and_links_every_page() -> None:
    text = README.read_text()
    assert [h for h in NEWCOMER if h not in text] == []
    assert [name for name in nav_files() if name != "index.md" and f"](docs/{name})" not in text] == []


def test_the_site_builds_with_strict_checks(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "routing" / "index.html").is_file()
