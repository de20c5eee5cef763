"""Git for the A/B end-to-end tests: a pytester directory made a repository whose first
commit (``base``) holds what the test wrote, and git run in it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` (a fixed author), its output stripped; fails on an error."""
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit_base(repo: Path) -> Path:
    """``repo`` as a new repository with everything in it committed as ``base``."""
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo
