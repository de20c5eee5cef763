"""A user's own Locust users in a swarm process (imports Locust): a locustfile's User
classes loaded by path (or ``module:Class``), ``constant_pacing``/``constant_throughput``
users held to a fixed schedule and timed from each task's intended start, and the
exceptions raised in their tasks recorded as errors.

Pacing. Locust's ``constant_pacing(p)`` waits ``p`` less the task's run time, and a
late task restarts the schedule from where it ended: a server that stalls for a second
is never charged for the requests its users did not send meanwhile. Here a paced
class's ``wait_time`` keeps the schedule instead (task k is due at ``first + k * p``, a
late one is sent at once, never skipped: as the native and lean paced users do), and
every request of a task counts its latency from the task's due time: its own response
time plus how late its task started (``pacing.timing``), with the service time and the
lag recorded beside it (``RunResult.service``, ``schedule_lag``). A task's lag is taken
at its first request, from the user's own greenlet: requests sent from greenlets a task
spawns itself, and classes whose tasks include a ``TaskSet`` with a ``wait_time`` of its
own, are timed from their send only (said in a note).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pytest_webperf.swarm.recorder import Recorder, where
from pytest_webperf.swarm.userspec import parse_user_spec, user_failure

PACING = "constant_pacing.<locals>.wait_time_func"  # Locust's (constant_throughput's too)


class LoadFailed(Exception):
    """The user's file or module cannot give a User class; the message is one line."""


def load_module(path: str) -> ModuleType:
    """Import the locustfile at ``path`` (its directory first on ``sys.path``, as
    ``locust -f`` does); ``LoadFailed`` with one line if it cannot."""
    if not os.path.isfile(path):
        raise LoadFailed(f"locustfile {path}: no such file")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    name = f"webperf_locustfile_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadFailed(f"locustfile {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        at = where(exc, [path]) or os.path.basename(path)
        first = str(exc).splitlines()[0] if str(exc) else ""
        if isinstance(exc, SyntaxError):
            at = f"{os.path.basename(exc.filename or path)}:{exc.lineno}"
            first = exc.msg
        raise LoadFailed(
            f"locustfile {path} does not import: {type(exc).__name__}: {first} ({at})"
        ) from None
    return module


def user_classes(module: ModuleType) -> dict[str, type[Any]]:
    """The module's runnable User classes by name (not abstract, as ``locust -f`` finds)."""
    from locust import User

    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, User) and not value.abstract
    }


def shape_classes(module: ModuleType) -> list[str]:
    """The module's ``LoadTestShape`` classes (what ``locust -f`` would run as the shape)."""
    from locust import LoadTestShape

    return [
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, LoadTestShape)
        and not getattr(value, "abstract", True)
    ]


def load(user_spec: str) -> list[type[Any]]:
    """The User classes ``user_spec`` names (``file:PATH[:A,B]`` or ``module:Class``);
    ``LoadFailed`` with one line when there are none or the file has a shape."""
    parsed = parse_user_spec(user_spec)
    if parsed.path is None:
        module_name, class_name = parsed.module, parsed.classes[0]
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # the user's module: its error, in one line
            raise LoadFailed(user_failure(f"importing {module_name!r}", exc)) from None
        cls = getattr(module, class_name, None)
        from locust import User

        if not (inspect.isclass(cls) and issubclass(cls, User)):
            got = f"has no {class_name!r}" if cls is None else f"gives {cls!r} as {class_name}"
            raise LoadFailed(
                f"the user class {user_spec!r}: module {module_name!r} {got}, not a "
                "Locust User class (module:UserClass names a subclass of locust.User)"
            )
        return [cls]
    path = parsed.path
    module = load_module(path)
    shapes = shape_classes(module)
    if shapes:
        raise LoadFailed(
            f"locustfile {path} has a LoadTestShape ({', '.join(shapes)}): webperf sets the "
            "users and the time itself (users=, duration=): remove the shape class, or move "
            "it to another file"
        )
    found = user_classes(module)
    if not found:
        raise LoadFailed(
            f"locustfile {path} has no User class (a non-abstract subclass of locust's "
            "User, HttpUser, FastHttpUser or webperf's LeanHttpUser)"
        )
    if not parsed.classes:
        return list(found.values())
    missing = [name for name in parsed.classes if name not in found]
    if missing:
        raise LoadFailed(
            f"user_class={', '.join(missing)}: not a User class of {path} "
            f"(it has {', '.join(sorted(found))})"
        )
    return [found[name] for name in parsed.classes]


def pacing_period(cls: type[Any]) -> float | None:
    """The period (s) of a class paced with Locust's ``constant_pacing`` or
    ``constant_throughput``, else None."""
    wait = cls.__dict__.get("wait_time")
    if wait is None:
        for base in cls.__mro__[1:]:
            if "wait_time" in base.__dict__:
                wait = base.__dict__["wait_time"]
                break
    if wait is None or getattr(wait, "__qualname__", "") != PACING or not wait.__closure__:
        return None
    cells = dict(zip(wait.__code__.co_freevars, wait.__closure__, strict=True))
    period = cells["wait_time"].cell_contents if "wait_time" in cells else None
    return float(period) if isinstance(period, int | float) and period > 0 else None


def own_waits(cls: type[Any]) -> list[str]:
    """The TaskSets among ``cls``'s tasks (nested too) with a ``wait_time`` of their own."""
    from locust import TaskSet

    found: list[str] = []
    seen: set[type[Any]] = set()

    def visit(tasks: Iterable[Any]) -> None:
        for task in tasks:
            if inspect.isclass(task) and issubclass(task, TaskSet) and task not in seen:
                seen.add(task)
                if any("wait_time" in k.__dict__ for k in task.__mro__ if k is not TaskSet):
                    found.append(task.__name__)
                visit(getattr(task, "tasks", ()))

    visit(getattr(cls, "tasks", ()))
    return found


@dataclass
class _Task:
    """One paced user's current task: when it was due, and how late it started (ns;
    None until its first request)."""

    due: int | None = None
    lag: int | None = None


class Pacer:
    """The schedules of this process's paced users, one per user greenlet."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock
        self.tasks: weakref.WeakKeyDictionary[Any, _Task] = weakref.WeakKeyDictionary()

    def pace(self, cls: type[Any], period_s: float) -> None:
        """Hold ``cls`` to a fixed schedule of one task every ``period_s``."""
        pacer, period = self, max(1, int(period_s * 1e9))
        on_start = cls.on_start

        def wait_time(user: Any) -> float:
            return pacer.next_wait(period)

        def start(user: Any) -> None:
            pacer.begin()
            on_start(user)

        wait_time.webperf_period_s = period_s  # type: ignore[attr-defined]
        cls.wait_time = wait_time
        cls.on_start = start

    def _current(self) -> Any:
        import gevent

        return gevent.getcurrent()

    def begin(self) -> None:
        """A paced user starts (in its own greenlet): its first task is due at its
        first request."""
        self.tasks[self._current()] = _Task()

    def next_wait(self, period_ns: int) -> float:
        """After a task: the next one is due one period after this one was; how long
        to wait for it (0 when it is already late: sent at once, never skipped)."""
        now = self.clock()
        task = self.tasks.get(self._current())
        if task is None:
            task = self.tasks[self._current()] = _Task()
        task.due = (now if task.due is None else task.due) + period_ns
        task.lag = None
        return max(0, task.due - now) / 1e9

    def lag_us(self, service_us: int) -> int | None:
        """How late the current task of the user sending this request started (us),
        taken at its first request; None for a request not from a paced user."""
        task = self.tasks.get(self._current())
        if task is None:
            return None
        if task.lag is None:
            sent = self.clock() - service_us * 1000
            if task.due is None:  # the user's first task: on time by definition
                task.due = sent
            task.lag = max(0, sent - task.due)
        return task.lag // 1000


def equip_users(
    classes: list[type[Any]], recorder: Recorder, host: str, emit_note: Callable[[str], None]
) -> None:
    """Send every class's load to ``host`` (the target: a class's own host would load
    another server, on both sides of an A/B run; said in a note), time the paced ones
    from their intended starts, and name where their tasks' exceptions were raised."""
    files = set()
    for cls in classes:
        own = getattr(cls, "host", None)
        if own and own.rstrip("/") != host.rstrip("/"):
            emit_note(
                f"{cls.__name__}.host {own!r} is not used: the load goes to the target, {host}"
            )
        cls.host = host
        with contextlib.suppress(TypeError):  # a class made at run time has no file
            files.add(inspect.getfile(cls))
    recorder.user_files = tuple(sorted(files))
    pacer: Pacer | None = None
    for cls in classes:
        period = pacing_period(cls)
        if period is None:
            continue
        nested = own_waits(cls)
        if nested:
            emit_note(
                f"{cls.__name__}: TaskSet {', '.join(nested)} has a wait_time of its own: "
                "its latency is the service time, not counted from the intended start"
            )
            continue
        pacer = pacer or Pacer()
        pacer.pace(cls, period)
    if pacer is not None:
        recorder.pacing = pacer.lag_us


def inspect_main(user_spec: str) -> dict[str, Any]:
    """What ``python -m pytest_webperf.swarm --inspect USER_SPEC`` prints: the classes
    it would run, or the one-line reason it cannot."""
    try:
        classes = load(user_spec)
    except LoadFailed as exc:
        return {"error": str(exc)}
    return {
        "classes": [
            {
                "name": cls.__name__,
                "host": getattr(cls, "host", None) or None,
                "pacing_s": pacing_period(cls),
            }
            for cls in classes
        ]
    }
