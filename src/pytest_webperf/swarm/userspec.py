"""A user's own Locust users, named in a swarm spec (no Locust import: safe anywhere).

``SwarmSpec.user_class`` names the built-in users (``native``, ``lean``, ``fast``,
``mqtt``), a class by import path (``module:Class``) or a locustfile by path
(``file:/abs/path.py``, all its User classes; ``file:/abs/path.py:A,B``, those).
``check`` imports them in a child Python before anything starts (``import locust``
patches the process with gevent: never in pytest's) and says in one line why they
cannot run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_webperf.errors import OptionError

BUILT_IN = ("native", "lean", "fast", "mqtt", "mqtt-native", "websocket", "sse", "auto")
FILE = "file:"
_CLASSES = re.compile(r"^[A-Za-z_]\w*(,[A-Za-z_]\w*)*$")
CHECK_TIMEOUT_S = 120.0  # importing Locust and the file, on a busy machine


@dataclass(frozen=True)
class UserSpec:
    """What a custom ``user_class`` names: a locustfile (``path``) or a module."""

    path: str | None  # the locustfile, absolute
    module: str  # the module (``module:Class``), "" for a file
    classes: tuple[str, ...]  # the classes asked for; () with a file: all of them


def is_custom(user_class: str) -> bool:
    """Whether ``user_class`` is the user's own (not a built-in user)."""
    return user_class not in BUILT_IN


def file_spec(path: Path | str, classes: Sequence[str] = ()) -> str:
    """The ``user_class`` of a locustfile (absolute) and, optionally, some of its classes."""
    return FILE + str(path) + (":" + ",".join(classes) if classes else "")


def parse_user_spec(text: str) -> UserSpec:
    """``file:PATH[:A,B]`` or ``module:Class`` as a ``UserSpec``; ValueError otherwise."""
    if text.startswith(FILE):
        rest = text[len(FILE) :]
        head, sep, tail = rest.rpartition(":")
        if sep and head and _CLASSES.match(tail):
            return UserSpec(head, "", tuple(tail.split(",")))
        return UserSpec(rest, "", ())
    module, sep, cls = text.partition(":")
    if not sep or not module or not re.match(r"^\w+$", cls):
        raise ValueError(f"{text!r} is neither module:Class nor file:/path/to/locustfile.py")
    return UserSpec(None, module, (cls,))


def label(user_class: str, classes: Sequence[str] = ()) -> str:
    """What a measurement of these users is called: ``locustfile.py: A, B`` or
    ``module:Class`` (what ran, not a request path it did not send)."""
    parsed = parse_user_spec(user_class)
    if parsed.path is None:
        return user_class
    names = classes or parsed.classes
    return f"{Path(parsed.path).name}: {', '.join(names)}" if names else Path(parsed.path).name


@dataclass(frozen=True)
class Checked:
    """What a check found: the classes that will run, each with its own host (or None:
    the target's) and its pacing period (``constant_pacing``/``constant_throughput``)."""

    classes: tuple[str, ...]
    hosts: dict[str, str | None]
    pacing_s: dict[str, float | None]


def check(user_class: str, *, what: str = "user_class") -> Checked:
    """Import ``user_class``'s users in a child Python; ``OptionError`` (one line) if
    the file is missing, does not import, has no User class or has a LoadTestShape."""
    try:
        parsed = parse_user_spec(user_class)
    except ValueError as exc:
        raise OptionError(f"{what}: {exc}") from None
    if parsed.path is not None and not Path(parsed.path).is_file():
        raise OptionError(f"locustfile {parsed.path}: no such file")
    argv = [sys.executable, "-m", "pytest_webperf.swarm", "--inspect", user_class]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise OptionError(
            f"{what}: importing {user_class} took over {CHECK_TIMEOUT_S:g} s "
            "(does the file do work at import?)"
        ) from None
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    try:
        answer: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    if "error" in answer:
        raise OptionError(str(answer["error"]))
    if done.returncode != 0 or "classes" not in answer:
        tail = done.stderr.decode(errors="replace").strip().splitlines()
        raise OptionError(
            f"{what}: checking {user_class} failed"
            + (f": {tail[-1]}" if tail else f" (exit status {done.returncode})")
        )
    classes = answer["classes"]
    return Checked(
        classes=tuple(str(c["name"]) for c in classes),
        hosts={str(c["name"]): c.get("host") for c in classes},
        pacing_s={str(c["name"]): c.get("pacing_s") for c in classes},
    )


_CHECKED: dict[str, Checked] = {}  # module:Class, checked once per process


def check_once(user_class: str, *, what: str = "user_class") -> Checked:
    """``check`` for a class given by module (``--webperf-user=module:Class``): its
    module does not change during a session, so it is imported once."""
    found = _CHECKED.get(user_class)
    if found is None:
        found = _CHECKED[user_class] = check(user_class, what=what)
    return found


def locustfile_path(locustfile: object) -> Path:
    """``webperf.locust``'s ``locustfile``: an existing ``.py`` file, made absolute
    (relative to the current directory); ``OptionError`` otherwise."""
    if not isinstance(locustfile, str | os.PathLike) or not str(locustfile):
        raise OptionError(
            f"locustfile={locustfile!r}: the path of a locustfile (a .py file), as a str or Path"
        )
    path = Path(locustfile).absolute()
    if not path.exists():
        raise OptionError(f"locustfile={str(locustfile)!r}: no such file ({path})")
    if not path.is_file() or path.suffix != ".py":
        raise OptionError(f"locustfile={str(locustfile)!r}: not a .py file ({path})")
    return path


def class_names(user_class: object) -> tuple[str, ...]:
    """``webperf.locust``'s ``user_class``: None (every User class of the file), a class
    name or several; ``OptionError`` otherwise."""
    if user_class is None:
        return ()
    names = [user_class] if isinstance(user_class, str) else user_class
    if (
        isinstance(names, Sequence)
        and names
        and all(isinstance(n, str) and re.match(r"^[A-Za-z_]\w*$", n) for n in names)
    ):
        return tuple(dict.fromkeys(names))
    raise OptionError(
        f"user_class={user_class!r}: the name of a User class of the locustfile, or a "
        "list of names (e.g. user_class='WebsiteUser')"
    )


def user_failure(what: str, exc: BaseException, *, anywhere: bool = False) -> str:
    """One line for an exception raised by the user's own code: ``importing 'mymod'
    failed: ImportError: no module named x (at /src/mymod.py:3)``, the place being the
    deepest frame in neither Python's library, the installed packages nor webperf
    (``anywhere``: failing that, the deepest frame at all)."""
    import sysconfig

    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    libraries = {
        os.path.abspath(p) + os.sep
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [
        f
        for f in frames
        if not f.filename.startswith("<")
        and not os.path.abspath(f.filename).startswith((ours, *libraries))
    ]
    where = ""
    if theirs or (anywhere and frames):
        frame = (theirs or frames)[-1]
        name = os.path.abspath(frame.filename)
        shown = os.path.relpath(name) if name.startswith(os.getcwd() + os.sep) else name
        where = f" (at {shown}:{frame.lineno})"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    said = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"{what} failed: {said}{where}"
