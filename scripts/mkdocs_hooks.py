"""MkDocs hooks (mkdocs.yml): the site's home page is the repository's README.md.

One text for both: GitHub shows README.md, the site renders it as index.md with its
``docs/`` links made relative to the site.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


def on_page_read_source(page: Any, config: Any) -> str | None:
    if page.file.src_uri != "index.md":
        return None
    return README.read_text(encoding="utf-8").replace("](docs/", "](")
