"""docs/explanation/modules.md names every module under src/pytest_webperf/, and only those;
no module passes 450 lines."""

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


LIMIT = 450  # lines; past it a module is split down into a package (modules.md, the rule)


def test_no_module_passes_the_limit() -> None:
    long = {
        p.relative_to(PACKAGE).as_posix(): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > LIMIT
    }
    assert long == {}, f"split these down into packages (at most {LIMIT} lines each)"
