"""docs/explanation/modules.md names every module under src/pytest_webperf/, and only those."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "pytest_webperf"


def test_the_module_table_lists_every_module() -> None:
    listed = set(
        re.findall(
            r"^\| `([\w/]+\.py)` \|",
            (ROOT / "docs" / "explanation" / "modules.md").read_text(),
            re.M,
        )
    )
    present = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    assert sorted(present - listed) == [], "add them to docs/explanation/modules.md"
    assert sorted(listed - present) == [], "gone: remove them from docs/explanation/modules.md"
