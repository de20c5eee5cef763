"""The arguments a test passes to ``webperf.http``, ``process``, ``server`` and ``mqtt``,
checked at the call, before anything starts: a wrong type or value is one
``OptionError`` naming the call, the parameter and what it accepts::

    webperf.http(concurrency=[10, 50]): concurrency is one whole number of users >= 1
    (a list of them goes in @pytest.mark.webperf(concurrency=[...]))

Each call passes its ``locals()``; only the parameters in its table are checked (the
request shape of ``http``, ``path`` to ``expect_*``, has its own checks). The option
parsers are ``values.py``'s; these reuse them where the values are the same.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_webperf.errors import OptionError
from pytest_webperf.values import parse_cpuset, parse_duration, parse_memory, parse_user_class
from pytest_webperf.workload import Request

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Check = Callable[[Any], str | None]  # the value -> None if accepted, else what is accepted


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def optional(check: Check) -> Check:
    def maybe(value: Any) -> str | None:
        return None if value is None else check(value)

    return maybe


def name(value: Any) -> str | None:
    if isinstance(value, str) and value.strip() and "\n" not in value:
        return None
    return "a non-empty string on one line (e.g. 'GET /hello warm')"


def users(value: Any) -> str | None:
    if _is_whole(value) and value >= 1:
        return None
    if isinstance(value, list | tuple):
        return (
            "one whole number of users >= 1; several concurrencies go in "
            "@pytest.mark.webperf(concurrency=[10, 50]) or --webperf-concurrency=10,50 "
            "(each runs the test once)"
        )
    return "a whole number of users >= 1 (e.g. 50)"


def repetitions(value: Any) -> str | None:
    if _is_whole(value) and value >= 1:
        return None
    return "a whole number of repetitions >= 1 (e.g. 3)"


def count(value: Any) -> str | None:
    if _is_whole(value) and value >= 0:
        return None
    return "a whole number of requests >= 0 (0: run for the duration)"


def _duration(value: Any, *, zero: bool) -> str | None:
    accepts = "a duration" + (" >= 0" if zero else " > 0") + " (e.g. '5s', '500ms', 2.5)"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return accepts
    try:
        seconds = parse_duration(value)
    except ValueError:
        return accepts
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        return accepts
    return None


def duration(value: Any) -> str | None:
    return _duration(value, zero=False)


def duration_or_zero(value: Any) -> str | None:
    return _duration(value, zero=True)


def per_second(value: Any) -> str | None:
    if _is_number(value) and value > 0:
        return None
    return "a number of requests per second > 0 (e.g. 200)"


def spawn_rate(value: Any) -> str | None:
    if _is_number(value) and value >= 0:
        return None
    return "a number of users started per second >= 0 (0: all within about a second)"


def seconds(value: Any) -> str | None:
    if _is_number(value) and value > 0:
        return None
    return "a number of seconds > 0 (e.g. 30)"


def user(value: Any) -> str | None:
    if isinstance(value, str):
        try:
            parse_user_class(value)
        except ValueError:
            pass
        else:
            return None
    return "'auto', 'native', 'lean', 'fast' or 'module:UserClass' (your own Locust User)"


def flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "True or False"


def qos(value: Any) -> str | None:
    return None if _is_whole(value) and value in (0, 1, 2) else "0, 1 or 2"


def mqtt_protocol(value: Any) -> str | None:
    return None if _is_whole(value) and value in (4, 5) else "4 (MQTT 3.1.1) or 5 (MQTT 5.0)"


def topic(value: Any) -> str | None:
    if isinstance(value, str) and value and not set(value) & {"+", "#", "\0"}:
        return None
    return "a topic prefix to publish under, without the wildcards '+' and '#' (e.g. 'telemetry')"


def _env_key(key: Any) -> bool:
    """What an environment can hold as a name: anything but ``=`` and NUL (``{**os.environ,
    ...}`` passes names no shell would write)."""
    return isinstance(key, str) and bool(key) and "=" not in key and "\0" not in key


def environment(value: Any) -> str | None:
    """A process's environment: names to strings (as the process will see them)."""
    accepts = "a mapping of environment names to strings (e.g. {'WORKERS': '4'})"
    if not isinstance(value, Mapping):
        return accepts
    for key, item in value.items():
        if not _env_key(key):
            return f"{accepts}; {key!r} is not an environment variable name"
        if not isinstance(item, str):
            return f"{accepts}; {key}={item!r} is not a string (write {str(item)!r})"
    return None


def server_environment(value: Any) -> str | None:
    """A catalogue server's environment: ``NAME`` for the server, ``part.NAME`` for a part
    of a composite; numbers are written out as the container gets them."""
    accepts = (
        "a mapping of environment names (NAME, or part.NAME for a part of a composite "
        "server) to strings (e.g. {'WORKERS': '4'})"
    )
    if not isinstance(value, Mapping):
        return accepts
    for key, item in value.items():
        if not _env_key(key):
            return f"{accepts}; {key!r} is not an environment variable name"
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            return f"{accepts}; {key}={item!r} is not a string"
    return None


def command(value: Any) -> str | None:
    accepts = "a command line (a string, or a list of strings) (e.g. 'python app.py')"
    if isinstance(value, str):
        try:
            return None if shlex.split(value) else accepts
        except ValueError as exc:  # "No closing quotation"
            return f"{accepts}; it does not split into words: {exc}"
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, str | os.PathLike) for v in value)
    ):
        return None
    return accepts


def build(value: Any) -> str | None:
    accepts = "a build command (a shell string, or a list of strings) (e.g. ['make', 'server'])"
    if isinstance(value, str):
        return None if value.strip() else accepts
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return None
    return accepts


def watch(value: Any) -> str | None:
    accepts = (
        "a list of paths in the repository (relative to cwd, or absolute; '!path' leaves one "
        "out) (e.g. ['server/', 'go.mod'])"
    )
    if isinstance(value, str | os.PathLike):
        return f"{accepts}; a single path goes in a list: [{str(value)!r}]"
    if not isinstance(value, list | tuple) or not value:
        return accepts
    for item in value:
        if not isinstance(item, str | os.PathLike) or not str(item).strip("!").strip():
            return f"{accepts}; {item!r} is not a path"
    return None


def port_env(value: Any) -> str | None:
    if isinstance(value, str) and _ENV_NAME.fullmatch(value):
        return None
    return "the name of the environment variable that gets the port (e.g. 'PORT')"


def health(value: Any) -> str | None:
    if isinstance(value, str) and (value == "tcp" or (value.startswith("/") and " " not in value)):
        return None
    return (
        "a path on the target that answers when it is up (e.g. '/health'; not a URL: "
        "the target's address is its own), or 'tcp' (a connection is enough)"
    )


def directory(value: Any) -> str | None:
    if not isinstance(value, str | os.PathLike):
        return "a directory (a string or a path)"
    if not os.path.isdir(value):
        return "an existing directory (relative to the current one, or absolute)"
    return None


def cpus(value: Any) -> str | None:
    if _is_number(value) and value > 0:
        return None
    return "a number of CPUs > 0 (e.g. 1.5)"


def _parsed(parse: Callable[[str], Any], accepts: str) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return accepts
        try:
            parse(value)
        except ValueError:
            return accepts
        return None

    return check


memory = _parsed(parse_memory, "a memory size (e.g. '512m', '2g')")
cpuset = _parsed(parse_cpuset, "a set of CPUs (e.g. '1', '0-1', '0,2')")

HTTP: dict[str, Check] = {
    "name": optional(name),
    "concurrency": optional(users),
    "duration": optional(duration),
    "warmup": optional(duration_or_zero),
    "repeat": optional(repetitions),
    "user": optional(user),
    "interval": optional(duration),
    "rate": optional(per_second),
    "requests": optional(count),
    "arrival_rate": optional(per_second),
}
PROCESS: dict[str, Check] = {
    "command": command,
    "name": optional(name),
    "port_env": port_env,
    "health": health,
    "startup_timeout": seconds,
    "env": optional(environment),
    "cwd": optional(directory),
    "build": optional(build),
    "watch": optional(watch),
}
SERVER: dict[str, Check] = {
    "name": name,
    "cpus": optional(cpus),
    "memory": optional(memory),
    "cpuset": optional(cpuset),
    "env": optional(server_environment),
}
MQTT: dict[str, Check] = {
    "users": optional(users),
    "interval": duration_or_zero,
    "qos": qos,
    "duration": optional(duration),
    "warmup": optional(duration_or_zero),
    "repeat": optional(repetitions),
    "drain": duration_or_zero,
    "quiet": duration,
    "spawn_rate": optional(spawn_rate),
    "observe": flag,
    "topic": topic,
    "protocol": mqtt_protocol,
    "name": optional(name),
}
CAPACITY: dict[str, Check] = {
    "duration": duration,
    "warmup": duration_or_zero,
    "user": optional(user),
    "name": optional(name),
}
CALLS: dict[str, dict[str, Check]] = {
    "http": HTTP,
    "capacity": CAPACITY,
    "process": PROCESS,
    "server": SERVER,
    "mqtt": MQTT,
}


def check(call: str, arguments: Mapping[str, Any]) -> None:
    """``webperf.<call>``'s ``arguments`` (its ``locals()``), checked: the first that is
    not accepted raises an ``OptionError`` naming it and what it accepts."""
    for parameter, accepts in CALLS[call].items():
        if parameter not in arguments:
            continue
        value = arguments[parameter]
        wanted = accepts(value)
        if wanted is not None:
            shown = repr(value)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise OptionError(f"webperf.{call}({parameter}={shown}): {parameter} is {wanted}")


def closing(entry: Request) -> Request:
    """A mix entry that asks for a new connection per request (``keepalive=False``)."""
    kept = tuple((k, v) for k, v in entry.headers if k.lower() != "connection")
    return dataclasses.replace(entry, headers=(*kept, ("Connection", "close")))


def check_connection_reuse(
    keepalive: object,
    tls_resume: object,
    url: str,
    user_class: str,
    headers: Mapping[str, str] | None,
) -> Mapping[str, str] | None:
    """``webperf.http(keepalive=..., tls_resume=...)``: the request's headers (with
    ``Connection: close`` for a new connection per request)."""
    for name, value in (("keepalive", keepalive), ("tls_resume", tls_resume)):
        if not isinstance(value, bool):
            raise OptionError(f"webperf.http({name}=...): True or False, not {value!r}")
    if tls_resume and (keepalive or not url.startswith("https://")):
        raise OptionError(
            "webperf.http(tls_resume=True): for an https:// target with keepalive=False "
            "(a new connection per request, resuming the last TLS session)"
        )
    if tls_resume and user_class == "fast":
        raise OptionError(
            "webperf.http(tls_resume=True): the fast user does not resume TLS sessions; "
            "use --webperf-user=native or lean"
        )
    if keepalive:
        return headers
    kept = {k: v for k, v in (headers or {}).items() if k.lower() != "connection"}
    return {**kept, "Connection": "close"}


def check_tls_ca(tls_ca: object, url: str, user_class: str) -> str | None:
    """``webperf.http(tls_ca=...)``: a readable CA file for an https:// target, as an
    absolute path (the swarm child runs elsewhere); None when not given."""
    if tls_ca is None:
        return None
    if not isinstance(tls_ca, (str, os.PathLike)):
        raise OptionError(f"webperf.http(tls_ca=...): a path to a CA file (PEM), not {tls_ca!r}")
    path = Path(tls_ca).expanduser().resolve()
    if not path.is_file():
        raise OptionError(f"webperf.http(tls_ca={str(tls_ca)!r}): no such file (a CA file, PEM)")
    if not url.startswith("https://"):
        raise OptionError(
            f"webperf.http(tls_ca=...): the target {url} does not speak TLS "
            "(webperf.process(..., tls=True), tls = true in server.toml, or an https:// URL)"
        )
    if user_class == "fast":
        raise OptionError(
            "webperf.http(tls_ca=...): the fast user does not verify certificates; "
            "use --webperf-user=native or lean"
        )
    return str(path)
