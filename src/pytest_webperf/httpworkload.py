"""A test's HTTP arguments as request shapes and a Workload (webperf.http,
webperf.request): each argument checked at the call, one line naming it and what it
accepts; closed loop, paced, arriving or counted."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NoReturn

from pytest_webperf.errors import OptionError
from pytest_webperf.values import parse_duration
from pytest_webperf.workload import SCHEDULED, BodyCheck, Request, Workload

MAX_NEEDLE = 1024  # a body substring check: at most this many bytes (the native loop's)


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP method (RFC 9110 token)


MIX_EXAMPLE = 'mix=[webperf.request("/a", weight=3), webperf.request("/b", weight=1)]'


def _fail(message: str) -> NoReturn:
    raise OptionError(message)


def check_path(path: object, where: str = "path=") -> str:
    """``path`` if it is a request path (``/...``), else an ``OptionError`` saying what is."""
    if isinstance(path, list | tuple | set | frozenset | dict):
        _fail(f"{where} is one path, not {path!r}: for several use {MIX_EXAMPLE}")
    if not isinstance(path, str):
        _fail(f"{where}{path!r}: a path is a str starting with '/' (e.g. '/hello')")
    if "://" in path or path.startswith("//"):
        _fail(
            f"{where}{path!r}: a path is a path; the target is the target: give the path "
            "alone (e.g. '/hello'), the server is webperf.http's target (for HTTPS, start "
            "the target with tls=True)"
        )
    if not path.startswith("/"):
        _fail(f"{where}{path!r}: a path starts with '/' (e.g. '/hello')")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in path):
        _fail(f"{where}{path!r}: a path has no spaces or control characters (percent-encode them)")
    return path


def check_method(method: object, where: str = "method=") -> str:
    if not isinstance(method, str) or not _TOKEN.fullmatch(method):
        _fail(f"{where}{method!r}: a method is an HTTP method name such as 'GET' or 'POST'")
    return method.upper()


def check_body(body: object, where: str = "body=") -> bytes:
    if not isinstance(body, bytes | str):
        _fail(f"{where}{body!r}: a body is bytes or a str (sent as UTF-8)")
    return body.encode() if isinstance(body, str) else bytes(body)


def check_headers(headers: object, where: str = "headers=") -> tuple[tuple[str, str], ...]:
    if headers is None:
        return ()
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        _fail(f"{where}{headers!r}: headers are a dict of str names to str values")
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or "\r" in value or "\n" in value:
            _fail(f"{where}{{{name!r}: {value!r}}}: a header is a name token and a one-line value")
    return tuple(headers.items())


def check_status(expect: object, where: str = "expect_status=") -> frozenset[int] | None:
    """The statuses that count as success: an int, a set of ints or a range (100-999)."""
    if expect is None:
        return None
    what = "an int (e.g. 200), a set of ints ({200, 201}) or a range (range(200, 300))"
    if isinstance(expect, bool):
        _fail(f"{where}{expect!r}: {what}")
    if isinstance(expect, int):
        statuses = frozenset({expect})
    elif isinstance(expect, set | frozenset | range):
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in expect):
            _fail(f"{where}{expect!r}: {what}")
        statuses = frozenset(expect)
    else:
        _fail(f"{where}{expect!r}: {what}")
    if not statuses or not all(100 <= s <= 999 for s in statuses):
        _fail(f"{where}{expect!r}: HTTP statuses from 100 to 999, at least one")
    return statuses


def check_body_expectation(expect: object, where: str = "expect_body=") -> BodyCheck | None:
    """A substring the body must contain (str as UTF-8, or bytes), or a compiled regex."""
    if expect is None:
        return None
    if isinstance(expect, re.Pattern):
        return expect
    if not isinstance(expect, str | bytes):
        _fail(
            f"{where}{expect!r}: a substring the body contains (str or bytes) or a "
            "re.compile(...) pattern"
        )
    needle = expect.encode() if isinstance(expect, str) else bytes(expect)
    if not needle or len(needle) > MAX_NEEDLE:
        _fail(
            f"{where}{expect!r}: a substring of 1 to {MAX_NEEDLE} bytes "
            "(for more, a re.compile(...) pattern)"
        )
    return needle


def request(
    path: str,
    *,
    method: str = "GET",
    body: bytes | str = b"",
    headers: Mapping[str, str] | None = None,
    weight: float = 1,
    name: str | None = None,
    expect_status: int | set[int] | frozenset[int] | range | None = None,
    expect_body: str | bytes | re.Pattern[str] | re.Pattern[bytes] | None = None,
) -> Request:
    """``webperf.request``: one entry of a mix, validated (an ``OptionError`` naming the
    parameter otherwise)."""
    where = "webperf.request"
    path = check_path(path, f"{where}(path=")
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        _fail(f"{where}({path!r}, weight={weight!r}): a weight is a number > 0")
    if not (math.isfinite(weight) and weight > 0):
        _fail(f"{where}({path!r}, weight={weight!r}): a weight is a number > 0")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        _fail(f"{where}({path!r}, name={name!r}): a name is a non-empty str (default: the path)")
    return Request(
        path=path,
        method=check_method(method, f"{where}({path!r}, method="),
        body=check_body(body, f"{where}({path!r}, body="),
        headers=check_headers(headers, f"{where}({path!r}, headers="),
        weight=float(weight),
        name=name or path,
        expect_status=check_status(expect_status, f"{where}({path!r}, expect_status="),
        expect_body=check_body_expectation(expect_body, f"{where}({path!r}, expect_body="),
    )


def check_mix(
    mix: object,
    expect_status: frozenset[int] | None,
    expect_body: BodyCheck | None,
) -> tuple[Request, ...]:
    """A mix's entries (``webperf.http``'s checks the default of each entry's own)."""
    if not isinstance(mix, list | tuple) or not mix:
        _fail(f"mix={mix!r}: a list of webperf.request(...) values, e.g. {MIX_EXAMPLE}")
    entries = []
    for item in mix:
        entry = item
        if not isinstance(entry, Request):
            _fail(f"mix=: {entry!r} is not a webperf.request(...): e.g. {MIX_EXAMPLE}")
        if entry.expect_status is None and expect_status is not None:
            entry = replace(entry, expect_status=expect_status)
        if entry.expect_body is None and expect_body is not None:
            entry = replace(entry, expect_body=expect_body)
        entries.append(entry)
    names = [e.name for e in entries]
    for name in names:
        if names.count(name) > 1:
            _fail(
                f"mix=: {names.count(name)} entries named {name!r}: give each its own "
                "name= (a name defaults to the path)"
            )
    return tuple(entries)


def http_workload(
    path: str | None,
    *,
    method: str | None,
    body: bytes | str | None,
    headers: Mapping[str, str] | None,
    user_class: str,
    workers: int,
    users: int,
    interval: str | float | None = None,
    rate: float | None = None,
    requests: int = 0,
    arrival_rate: float | None = None,
    mix: Sequence[Request] | None = None,
    expect_status: int | set[int] | frozenset[int] | range | None = None,
    expect_body: str | bytes | re.Pattern[str] | re.Pattern[bytes] | None = None,
) -> Workload:
    """``webperf.http``'s arguments as a workload, or an ``OptionError`` saying why not.

    ``interval`` paces each user; ``rate`` is a total rate over the users (wrk2's
    constant throughput: each user paced at users / rate, the users a cap on the
    requests in flight); ``requests`` is ab's fixed count; ``arrival_rate`` a total rate
    of requests due whatever the responses do, each sent by whichever user is idle (k6's
    constant arrival rate: the users are the cap, their connections opened as needed).
    Pacing, arrivals and counts are the native and lean users' (``user_class`` is
    resolved: not ``auto``); a count runs in one process. ``mix`` is several request
    shapes by weight (instead of ``path``, ``method``, ``body`` and ``headers``);
    ``expect_status``/``expect_body`` what a response must be (a mix: each entry's
    default). Request shapes are checked first, each mistake one line."""

    shape = http_shape(
        path,
        method=method,
        body=body,
        headers=headers,
        mix=mix,
        expect_status=expect_status,
        expect_body=expect_body,
        user_class=user_class,
    )

    if arrival_rate is not None:
        given = [f"{k}=" for k, v in (("interval", interval), ("rate", rate)) if v is not None]
        if given or requests:
            raise OptionError(
                f"arrival_rate= sets when requests are due, {(given or ['requests='])[0]} too: "
                "give one of interval=, rate=, arrival_rate= and requests="
            )
        number = isinstance(arrival_rate, int | float) and not isinstance(arrival_rate, bool)
        if not number or not arrival_rate > 0:
            raise OptionError(f"arrival_rate={arrival_rate!r}: a rate is > 0 requests per second")
        if user_class not in SCHEDULED:
            raise OptionError(
                f"arrival_rate= is the native and lean users', not {user_class!r}: drop "
                "user= / --webperf-user (or give 'lean'), or drop the arrival rate"
            )

    if interval is not None and rate is not None:
        raise OptionError("interval= paces each user, rate= all of them: give one")
    interval_s = 0.0 if interval is None else parse_duration(interval)
    if interval is not None and interval_s <= 0:
        raise OptionError(f"interval={interval!r}: a pacing interval is > 0 (e.g. '500ms')")
    if rate is not None:
        if rate <= 0:
            raise OptionError(f"rate={rate!r}: a rate is > 0 requests per second")
        interval_s = users / rate
    paced = "interval=" if interval is not None else "rate="
    if interval_s and user_class not in SCHEDULED:
        raise OptionError(
            f"{paced} paces the native and lean users, not {user_class!r}: drop user= / "
            "--webperf-user, or the pacing"
        )
    if requests < 0:
        raise OptionError(f"requests={requests}: a request count is >= 0")
    if requests and (interval_s or user_class not in SCHEDULED or workers > 1):
        raise OptionError(
            f"requests={requests} (a fixed count) runs one native or lean generator process "
            "in a closed loop: not with interval= or rate=, another user or "
            "--webperf-workers > 1"
        )
    return replace(
        shape,
        interval_s=interval_s,
        requests=requests,
        arrival_rate=float(arrival_rate or 0.0),
    )


def http_shape(
    path: str | None,
    *,
    method: str | None,
    body: bytes | str | None,
    headers: Mapping[str, str] | None,
    mix: Sequence[Request] | None,
    expect_status: int | set[int] | frozenset[int] | range | None,
    expect_body: str | bytes | re.Pattern[str] | re.Pattern[bytes] | None,
    user_class: str,
) -> Workload:
    """What ``webperf.http`` sends (one request shape or a mix, and the checks of its
    responses), validated: an ``OptionError`` naming the parameter otherwise."""
    statuses = check_status(expect_status)
    body_check = check_body_expectation(expect_body)
    entries: tuple[Request, ...] = ()
    if mix is not None:
        given = [
            f"{k}="
            for k, v in (("path", path), ("method", method), ("body", body), ("headers", headers))
            if v is not None
        ]
        if given:
            raise OptionError(
                f"mix= carries each request's path, method, body and headers: not with "
                f"{given[0]} (give it to each webperf.request(...))"
            )
        entries = check_mix(mix, statuses, body_check)
        path, method, body = "/hello", "GET", b""
    path = check_path("/hello" if path is None else path)
    method = check_method("GET" if method is None else method)
    body = check_body(b"" if body is None else body)
    header_pairs = check_headers(headers)
    checked = statuses is not None or body_check is not None
    if (entries or checked) and user_class not in SCHEDULED:
        what = "mix=" if entries else "expect_status=" if statuses is not None else "expect_body="
        raise OptionError(
            f"{what} is the native and lean users', not {user_class!r}: drop user= / "
            "--webperf-user (or give 'lean')"
        )

    return Workload(
        path=path,
        method=method,
        body=body,
        headers=header_pairs if not entries else (),
        mix=entries,
        expect_status=None if entries else statuses,
        expect_body=None if entries else body_check,
    )


def http_name(workload: Workload, rate: float | None = None) -> str:
    """A measurement's default name: ``GET /path`` (``mix of 2 (GET /a 3, POST create
    1)``), with its pacing or count; a user's own Locust users are named by what ran
    (``locustfile.py: A, B``, ``module:Class``)."""
    if workload.users:
        return workload.users
    name = f"{workload.method} {workload.path}"
    if workload.mix:
        parts = ", ".join(f"{r.method} {r.name} {r.weight:g}" for r in workload.mix)
        name = f"mix of {len(workload.mix)} ({parts})"
    if rate is not None:
        return f"{name} at {rate:,g}/s"
    if workload.arrival_rate:
        return f"{name} arriving {workload.arrival_rate:,g}/s"
    if workload.interval_s:
        return f"{name} every {workload.interval_s * 1000:g}ms"
    return f"{name} x{workload.requests:,}" if workload.requests else name
