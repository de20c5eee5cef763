"""What a test's ``webperf.http``/``locust``/``mqtt`` call sends, as the kind of load the
measurer runs: the HTTP user resolved for the target's URL, TLS and connection reuse
checked, the workload built and named; a locustfile's users checked on both sides of an
A/B run; the MQTT telemetry's settings parsed. ``api.Webperf`` checks the call's
arguments (``arguments.check``) and hands them over here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from pytest_webperf import arguments
from pytest_webperf.ab import Against
from pytest_webperf.errors import OptionError
from pytest_webperf.httpworkload import http_name, http_workload
from pytest_webperf.measure import HttpRequests, LocustUsers
from pytest_webperf.measurer import Measurer
from pytest_webperf.mqtt_telemetry import MqttTelemetry
from pytest_webperf.runplan import RunPlan
from pytest_webperf.swarm import userspec
from pytest_webperf.swarm.hotloop import resolve_user, user_for_url
from pytest_webperf.swarm.mqttloop import resolve_mqtt_user
from pytest_webperf.swarm.userspec import is_custom
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.values import parse_duration
from pytest_webperf.workload import Request, Workload


def _plan(measurer: Measurer, target: Target, args: Mapping[str, Any], users: Any) -> RunPlan:
    return measurer.plan(
        target,
        concurrency=users,
        duration=args["duration"],
        warmup=args["warmup"],
        repeat=args["repeat"],
    )


def http_load(
    measurer: Measurer, target: Target, args: Mapping[str, Any]
) -> tuple[HttpRequests, RunPlan, str]:
    """``webperf.http``'s call (``args``, by parameter name) as its load, its plan (a
    counted run has no warm-up: ab measures from the first request) and its name."""
    config = measurer.config
    user, mix, headers, keepalive, tls_resume = (
        args["user"],
        args["mix"],
        args["headers"],
        args["keepalive"],
        args["tls_resume"],
    )
    path, method, body, requests = args["path"], args["method"], args["body"], args["requests"]
    user_class = user_for_url(resolve_user(user or config.user), target.url)
    ca_file = arguments.check_tls_ca(args["tls_ca"], target.url, user_class)
    if mix is not None and not keepalive:  # each entry says Connection: close
        arguments.check_connection_reuse(keepalive, tls_resume, target.url, user_class, None)
        mix = [arguments.closing(entry) if isinstance(entry, Request) else entry for entry in mix]
    else:
        headers = arguments.check_connection_reuse(
            keepalive, tls_resume, target.url, user_class, headers
        )
    plan = _plan(measurer, target, args, args["concurrency"])
    workload = http_workload(
        path,
        method=method,
        body=body,
        headers=headers,
        user_class=user_class,
        workers=config.workers + config.remote_workers,  # all generator processes
        users=plan.concurrency,
        interval=args["interval"],
        rate=args["rate"],
        requests=config.requests if requests is None else requests,
        arrival_rate=args["arrival_rate"],
        mix=mix,
        expect_status=args["expect_status"],
        expect_body=args["expect_body"],
    )
    if workload.requests:
        plan = dataclasses.replace(plan, warmup_s=0.0)  # ab measures from the first request
    note = None
    if user_class == "native" and workload.regex:
        user_class = "lean"  # the native loop checks substrings only
        note = "a regular-expression expect_body is checked by the lean user: it sends this load"
    if is_custom(user_class):  # what ran is named, not a path it never sent
        given = [
            k
            for k, v in (("path", path), ("method", method), ("body", body), ("headers", headers))
            if v is not None
        ]
        if user is not None and given:  # a test's own contradiction (not the option's)
            raise OptionError(
                f"{given[0]}= is not sent by user={user!r}: your user class sends its own "
                "requests; drop it (or use webperf.locust(target, 'locustfile.py'))"
            )
        userspec.check_once(user_class, what="user=" if user else "--webperf-user")
        workload = dataclasses.replace(
            workload, path="", method="", body=b"", headers=(), users=user_class
        )
    kind = HttpRequests(
        workload, user_class=user_class, note=note, tls_ca=ca_file, tls_resume=tls_resume
    )
    return kind, plan, args["name"] or http_name(workload, args["rate"])


def locust_load(
    measurer: Measurer,
    target: Target,
    args: Mapping[str, Any],
    against: Callable[[], Against] | None,
) -> tuple[LocustUsers, RunPlan, Workload]:
    """``webperf.locust``'s call (``args``): its users, checked in a child Python before
    anything starts (the base's locustfile too, in an A/B run), as its load."""
    users = args["users"]
    path = userspec.locustfile_path(args["locustfile"])
    classes = userspec.class_names(args["user_class"])
    if users is not None and (isinstance(users, bool) or not isinstance(users, int) or users < 1):
        raise OptionError(f"users={users!r}: the number of Locust users, an int >= 1")
    change = userspec.file_spec(path, classes)
    checked = userspec.check(change)
    plan = _plan(measurer, target, args, users)
    base, base_spec = None, None
    if isinstance(target, PairedTarget) and target.base is not None:
        assert against is not None
        base = target.base
        base_spec = userspec.file_spec(against().tree.map(path) or path, classes)
        if base_spec != change:
            userspec.check(base_spec, what=f"the locustfile at {against().tree.ref}")
    workload = Workload(path="", method="", users=userspec.label(change, checked.classes))
    return LocustUsers(workload, change, base=base, base_user_class=base_spec), plan, workload


def mqtt_load(
    measurer: Measurer, target: Target, args: Mapping[str, Any]
) -> tuple[MqttTelemetry, RunPlan]:
    """``webperf.mqtt``'s call (``args``, by parameter name) as its telemetry load, and
    its plan with the test's spawn rate (else the run's)."""
    telemetry = MqttTelemetry(
        interval_s=parse_duration(args["interval"]),
        qos=args["qos"],
        drain_s=parse_duration(args["drain"]),
        quiet_s=parse_duration(args["quiet"]),
        observe=args["observe"],
        topic=args["topic"],
        user_class=resolve_mqtt_user(measurer.config.user),
        protocol=args["protocol"],
    )
    spawn_rate = args["spawn_rate"]
    plan = dataclasses.replace(
        _plan(measurer, target, args, args["users"] or measurer.concurrency),
        spawn_rate=measurer.config.spawn_rate if spawn_rate is None else spawn_rate,
    )
    return telemetry, plan
