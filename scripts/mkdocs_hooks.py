"""mkdocs hooks (mkdocs.yml `hooks:`): the site's home page is README.md, so the quick start, the
first configuration, the headers and the error codes are on the site too, written once.

`on_files` adds `index.md` generated from README.md with its `docs/...` links made relative to
the site (`docs/routing.md#reliability` -> `routing.md#reliability`). Uses mkdocs' public plugin
events and `File.generated` (mkdocs >= 1.6).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parent.parent / "README.md"


def home_page(readme: str) -> str:
    """README's text as the site's home page: `](docs/x.md...)` links as `](x.md...)`, a link to
    the `docs/` folder itself as plain text."""
    text = re.sub(r"\[([^\]]*)\]\(docs/\)", r"\1", readme)
    return text.replace("](docs/", "](")


def on_files(files: Files, config: Any) -> Files:
    """Add the home page (`index.md`) made from README.md."""
    files.append(File.generated(config, "index.md", content=home_page(README.read_text(encoding="utf-8"))))
    return files
