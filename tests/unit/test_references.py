"""Every place outside the package that names one of its modules or names (the tests'
inline conftests and servers, the benchmarks, the suites, the docs) names one that
exists: a reorganisation that moved ``checking`` into ``gate/outcome.py`` broke two
end-to-end tests' inline conftests and a benchmark's, which no import checker reads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLACES = ("tests", "benchmarks", "suites", "docs", "examples", "README.md", "scripts")
SUFFIXES = {".py", ".md", ".toml", ".ini", ".cfg", ".sh"}
FROM = re.compile(r"^\s*from\s+(pytest_webperf(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n#]+)", re.M)
DOTTED = re.compile(r"(?<![\w/.])pytest_webperf(?:\.[A-Za-z_]\w*)+")

# Run in a fresh interpreter: Locust (imported by the child side) patches the process
# with gevent, which must come first, as in a swarm's process.
RESOLVE = r"""
from gevent import monkey

monkey.patch_all()
import importlib
import json
import sys


def resolves(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


names = json.load(sys.stdin)
print(json.dumps([name for name in names if not resolves(name)]))
"""


def files() -> list[Path]:
    found: list[Path] = []
    for place in PLACES:
        path = ROOT / place
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [p for p in sorted(path.rglob("*")) if p.suffix in SUFFIXES]
    return found


def references(text: str) -> set[str]:
    """The dotted names a text imports or names in the package."""
    found: set[str] = set()
    for match in FROM.finditer(text):
        for item in match.group(2).strip("()").split(","):
            name = item.split(" as ")[0].strip()
            if name.isidentifier():
                found.add(f"{match.group(1)}.{name}")
    found |= {m.group(0) for m in DOTTED.finditer(text)}
    return {name for name in found if not name.endswith((".py", ".egg"))}


def test_the_reference_reader_finds_aliased_and_parenthesised_imports() -> None:
    text = (
        "from pytest_webperf.gate import outcome as o\n"
        "    from pytest_webperf.models import (\n        Measurement,\n        RunResult,\n)\n"
        "see `pytest_webperf.gate.judge` and src/pytest_webperf/plugin.py\n"
    )
    assert references(text) == {
        "pytest_webperf.gate",
        "pytest_webperf.gate.outcome",
        "pytest_webperf.models",
        "pytest_webperf.models.Measurement",
        "pytest_webperf.models.RunResult",
        "pytest_webperf.gate.judge",
    }


def test_every_reference_to_the_package_outside_it_resolves() -> None:
    by_name: dict[str, list[str]] = {}
    for path in files():
        for name in references(path.read_text(errors="replace")):
            by_name.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert by_name, "no reference found: the reader is broken"
    import json

    done = subprocess.run(
        [sys.executable, "-c", RESOLVE],
        input=json.dumps(sorted(by_name)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    missing = json.loads(done.stdout.strip().splitlines()[-1])
    assert not missing, "\n".join(f"{name}: {', '.join(by_name[name])}" for name in missing)


@pytest.mark.parametrize(
    "script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")), ids=str
)
def test_every_benchmark_starts(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
