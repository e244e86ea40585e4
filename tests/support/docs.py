"""The project's documentation as the tests read it: README.md, then the pages of `docs/` in the
order of `mkdocs.yml`'s nav (the order a reader meets them, and the order their runnable blocks
run in against one dev stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"


def nav_files(nav: list[Any] | None = None) -> list[str]:
    """The page files `mkdocs.yml`'s nav names (relative to `docs/`), in order, sections flattened."""
    entries = yaml.safe_load(MKDOCS.read_text())["nav"] if nav is None else nav
    files: list[str] = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        files += nav_files(value) if isinstance(value, list) else [value]
    return files


def pages() -> list[Path]:
    """README.md, then every page of the nav that is a file (the home page, `index.md`, is
    README itself, made at build time by `scripts/mkdocs_hooks.py`)."""
    return [README, *(ROOT / "docs" / name for name in nav_files() if (ROOT / "docs" / name).is_file())]


def all_text() -> str:
    """Every page's text, README first, joined by blank lines."""
    return "\n\n".join(page.read_text() for page in pages())
