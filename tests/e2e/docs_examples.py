"""The documentation's runnable examples: a fenced block right after a marker line.

``<!-- docs-example: runs -->`` before a ```python block: a complete test file, run by
``tests/e2e/test_docs_examples.py`` (every runnable example of a page in one pytest
run); ``<!-- docs-example: file NAME -->`` before a block: a file that page's
examples need beside them (a locustfile, a server), written as NAME. The comment is
invisible on the site.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
_MARKED = re.compile(
    r"^<!-- docs-example: (runs|file ([\w./-]+)) -->\n```(\w*)\n(.*?)^```", re.M | re.S
)
MARKER = "<!-- docs-example:"


@dataclass(frozen=True)
class Example:
    page: str  # relative to docs/
    kind: str  # "runs" (a test file) or "file" (a file beside the tests)
    name: str  # the file it is written as
    language: str
    code: str


def examples(page: Path) -> list[Example]:
    text = page.read_text()
    relative = page.relative_to(ROOT / "docs").as_posix()
    stem = re.sub(r"\W", "_", relative.removesuffix(".md"))
    found = []
    for number, match in enumerate(_MARKED.finditer(text), start=1):
        kind = "runs" if match.group(1) == "runs" else "file"
        name = f"test_{stem}_{number}.py" if kind == "runs" else match.group(2)
        found.append(Example(relative, kind, name, match.group(3), match.group(4)))
    return found


def markers(page: Path) -> int:
    """Marker lines (a line that starts with one; a page may quote it inline)."""
    return len(re.findall(f"^{re.escape(MARKER)}", page.read_text(), re.M))
