"""The ``webperf`` command: ``build`` the catalogue's images, ``list`` its servers,
start a ``new`` one, ``prune`` old images, render (``html``) and ``compare`` JSON reports,
measure a target's ``noise``, serve as a remote generator ``worker``, ``bisect`` to the
commit that made a test slower, draw a verdict ``history``. Each command's work lives in
``commands/``; this module parses and dispatches."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import docker

from pytest_webperf.commands import noise
from pytest_webperf.commands.new import new_server
from pytest_webperf.commands.prune import REPO_PREFIX, baselines, current_tags, plan
from pytest_webperf.errors import OptionError, WebperfError
from pytest_webperf.gate import decide
from pytest_webperf.gate.grammar import DEFAULT_CHECKS, parse_checks
from pytest_webperf.report import terminal
from pytest_webperf.report.html.page import write_html
from pytest_webperf.report.json_report import measurements, read_report, report
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.targets.images import ensure_images
from pytest_webperf.values import parse_duration, parse_positive_duration, parse_positive_int


def _catalog(args: argparse.Namespace) -> Catalog:
    """The built-in catalogue, then ./servers (as pytest uses its rootdir's), then --servers."""
    local = [Path("servers")] if Path("servers").is_dir() else []
    dirs = default_directories([*local, *(Path(d) for d in args.servers)])
    return Catalog(dict.fromkeys(d.resolve() for d in dirs))


def cmd_build(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    names = args.names or catalog.names()
    started = time.monotonic()
    if "worker" in names and "worker" not in catalog.names():  # the remote generator worker
        from pytest_webperf.commands.worker_image import ensure_worker_image

        print(f"{'worker':16} {ensure_worker_image()}")
        names = [n for n in names if n != "worker"]
        if not names:
            return 0
    for name in names:
        for server, tag in ensure_images(catalog, name).items():
            print(f"{server:16} {tag}")
    print(f"{len(names)} server(s) ready in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    for spec in catalog:
        print(f"{spec.name:16} {spec.kind:5} {catalog.source(spec.name):24} {spec.description}")
    searched = ", ".join(str(d) for d in catalog.directories)
    print(f"catalogue directories, the built-in first, later ones win: {searched}", file=sys.stderr)
    return 0


def cmd_html(args: argparse.Namespace) -> int:
    write_html(Path(args.output), read_report(Path(args.report)))
    print(f"webperf: HTML report written to {args.output}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Judge every measurement of NEW against the same one in BASE, as the gate would."""
    base = {m.key: m for m in measurements(read_report(Path(args.base)))}
    checks = parse_checks(args.compare_fail) if args.compare_fail else None
    judged = []
    for current in measurements(read_report(Path(args.new))):
        verdict = decide.decide(
            current,
            base.get(current.key),
            checks or DEFAULT_CHECKS,
            generator_bound=any(r.generator_bound for r in current.runs),
        )
        judged.append(dataclasses.replace(current, verdict=verdict))
    for line in terminal.summary(report(judged, {})):
        print(line)
    return 1 if any(m.verdict is not None and m.verdict.failed for m in judged) else 0


def cmd_new(args: argparse.Namespace) -> int:
    spec = new_server(Path(args.directory), args.name)
    print(f"webperf: wrote {spec.directory}/ (server.toml, Dockerfile, server.py)")
    where = (
        "found by itself when servers/ is at the project's root"
        if Path(args.directory).name == "servers"
        else f"run pytest with --webperf-servers={args.directory}"
    )
    print(
        f'next: in a test, webperf.server("{spec.name}") ({where}); '
        f"webperf --servers {args.directory} build {spec.name} builds it ahead"
    )
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Remove the ``webperf/*`` images whose tag the catalogue no longer builds; with
    ``--baselines``, the store's old profiles instead."""
    if args.baselines is not None:
        if not Path(args.baselines).is_dir():
            raise OptionError(f"--baselines {args.baselines}: no such directory")
        for line in baselines(Path(args.baselines), args.profiles_older_than, dry_run=args.dry_run):
            print(line)
        return 0
    if args.profiles_older_than is not None:
        raise OptionError("--profiles-older-than prunes a baseline store: give --baselines DIR")
    from pytest_webperf.targets.engine import docker_client  # only this command needs an engine

    client = docker_client()
    tags = [t for image in client.images.list(name=f"{REPO_PREFIX}*") for t in image.tags]
    todo = plan(tags, current_tags(_catalog(args)))
    for tag in todo.unknown:
        print(f"kept     {tag} (not a server of this catalogue; add its --servers DIR)")
    for tag in todo.stale:
        if args.dry_run:
            print(f"stale    {tag}")
            continue
        try:
            client.images.remove(tag)
        except docker.errors.APIError as exc:  # in use by a container, most likely
            print(f"kept     {tag} ({exc.explanation or exc})")
            continue
        print(f"removed  {tag}")
    verb = "would remove" if args.dry_run else "removed"
    print(f"webperf: {verb} {len(todo.stale)} stale image tag(s)", file=sys.stderr)
    return 0


def cmd_noise(args: argparse.Namespace) -> int:
    """An A/A run of one catalogue server: its spreads and what a gate could detect."""
    spec = _catalog(args).get(args.target)
    path = args.path or next((r for r in spec.routes if r != spec.health), "/hello")
    run = noise.NoiseRun(
        server=spec.name,
        path=path,
        concurrency=args.concurrency,
        duration_s=args.duration,
        warmup_s=args.warmup,
        repeat=args.repeat,
        restart_every=args.restart_every,
        servers=tuple(Path(d).resolve() for d in args.servers),
    )
    for line in noise.lines(noise.measure(run), min_pairs=args.min_pairs):
        print(line)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """A long-lived generator worker for the master at --master (another machine's swarm)."""
    from pytest_webperf.swarm.supervisor import BadMaster, supervise
    from pytest_webperf.swarm.trust.secret import secret_of

    try:
        try:
            secret = secret_of(args.secret_file, os.environ)
        except ValueError as exc:
            raise BadMaster(str(exc)) from None
        return supervise(
            args.master,
            args.idle_exit,
            secret=secret,
            allow=args.allow_target,
            trusted_network=args.trusted_network,
        )
    except BadMaster as exc:
        print(f"webperf worker: error: {exc}", file=sys.stderr)
        return 2


def cmd_bisect(args: argparse.Namespace) -> int:
    """The first commit after GOOD up to BAD whose tests regress against GOOD."""
    from pytest_webperf.commands.bisect import search as bisection

    extra = [f"--webperf-against-budget={args.budget:g}s"] if args.budget is not None else []
    search = bisection.bisect(
        Path.cwd(), args.good, args.bad, [*extra, *args.pytest_args], say=print, budget=args.budget
    )
    for line in bisection.conclusion(search):
        print(line)
    return 0 if search.nothing is None and len(search.suspects()) == 1 else 1


def cmd_history(args: argparse.Namespace) -> int:
    """The trend of every series in a verdict history, and its change points."""
    from pytest_webperf.report import history

    path = Path(args.path)
    try:
        records, broken = history.read(path)
    except OSError as exc:
        raise OptionError(f"webperf history: cannot read {path}: {exc.strerror}") from None
    analyses = history.analyse(records)
    print(f"webperf history: {len(records)} verdict(s) in {path}, {len(analyses)} series")
    if broken:
        print(f"webperf history: {broken} unreadable line(s) skipped")
    for analysis in analyses:
        for line in history.describe(analysis):
            print(line)
    history.write_html(Path(args.output), path, analyses)
    print(f"webperf: history written to {args.output}")
    return 0


def _worker_parser(sub: Any) -> None:
    """``webperf worker``'s arguments."""
    worker = sub.add_parser(
        "worker",
        help="generate load for a run's master elsewhere (--webperf-remote-workers): one "
        "worker per run, every run of a session, until the master ends it or goes away",
    )
    worker.add_argument("--master", required=True, metavar="HOST:PORT", help="its address")
    worker.add_argument(
        "--idle-exit",
        type=parse_positive_duration,
        default=300.0,
        metavar="DURATION",
        help="exit when no master has listened this long (default 300s; exit 2 if none ever)",
    )
    worker.add_argument(
        "--secret-file",
        metavar="PATH",
        help="the run's secret (else $WEBPERF_SECRET): the master must prove it holds it, "
        "and admits this worker by it",
    )
    worker.add_argument(
        "--allow-target",
        action="append",
        default=[],
        metavar="URL",
        help="a target this worker may load besides the master's own address (repeatable; "
        "e.g. http://10.0.0.9:8080)",
    )
    worker.add_argument(
        "--trusted-network",
        action="store_true",
        help="join a master beyond loopback without a secret (every host there is trusted)",
    )
    worker.set_defaults(func=cmd_worker)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="webperf", description=__doc__)
    top.add_argument(
        "--servers",
        action="append",
        default=[],
        metavar="DIR",
        help="extra server catalogue directory (repeatable)",
    )
    sub = top.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build server images (cached by content hash)")
    build.add_argument(
        "names", nargs="*", help="servers to build (default: all); worker: the generator worker"
    )
    build.set_defaults(func=cmd_build)
    sub.add_parser("list", help="list the catalogue").set_defaults(func=cmd_list)
    new = sub.add_parser("new", help="start a catalogue entry: DIR/NAME/ with an example server")
    new.add_argument("name")
    new.add_argument(
        "--directory", default="servers", metavar="DIR", help="the catalogue (default: servers)"
    )
    new.set_defaults(func=cmd_new)
    prune = sub.add_parser(
        "prune",
        help="remove webperf/* images whose tag the catalogue no longer builds; with "
        "--baselines DIR, the store's size and its old profiles",
    )
    prune.add_argument("--dry-run", action="store_true", help="list them, remove nothing")
    prune.add_argument(
        "--baselines", metavar="DIR", help="a baseline store (--webperf-baseline-dir)"
    )
    prune.add_argument(
        "--profiles-older-than",
        type=parse_positive_duration,
        metavar="AGE",
        help="remove the profiles of baselines saved longer ago than AGE (30d, 12h)",
    )
    prune.set_defaults(func=cmd_prune)
    html = sub.add_parser("html", help="render a JSON report (--webperf-json) as HTML")
    html.add_argument("report")
    html.add_argument("-o", "--output", default="webperf-report.html")
    html.set_defaults(func=cmd_html)
    cmp = sub.add_parser(
        "compare", help="judge NEW against BASE (two JSON reports); exit 1 on a regression"
    )
    cmp.add_argument("base")
    cmp.add_argument("new")
    cmp.add_argument("--compare-fail", help="checks, as --webperf-compare-fail")
    cmp.set_defaults(func=cmd_compare)
    aa = sub.add_parser(
        "noise",
        help="A/A-measure a server: its spread per run and per instance, and the "
        "regression an A/B gate could detect in 30/60/120 s",
    )
    aa.add_argument("target", help="catalogue server")
    aa.add_argument("--path", help="the route to load (default: its first route but health)")
    aa.add_argument("--concurrency", type=parse_positive_int, default=8)
    aa.add_argument("--duration", type=parse_positive_duration, default=3.0, help="per run")
    aa.add_argument("--warmup", type=parse_duration, default=1.0)
    aa.add_argument("--repeat", type=parse_positive_int, default=8, help="runs in all")
    aa.add_argument(
        "--restart-every",
        type=parse_positive_int,
        default=2,
        help="runs per instance (2 or more separates the per-run and instance spreads)",
    )
    aa.add_argument(
        "--min-pairs", type=parse_positive_int, default=3, help="the gate's --webperf-repeat"
    )
    aa.set_defaults(func=cmd_noise)
    _worker_parser(sub)
    bisect = sub.add_parser(
        "bisect",
        usage="webperf bisect [--budget DURATION] GOOD BAD [-- PYTEST ARGS]",
        epilog="after --: the tests and pytest options every step runs with",
        help="find the first commit after GOOD up to BAD whose webperf tests regress "
        "against GOOD (A/B at every step, in a temporary git worktree)",
    )
    bisect.add_argument("good", help="a commit known to be good (the base of every step)")
    bisect.add_argument("bad", help="a later commit known to be slower")
    bisect.add_argument(
        "--budget",
        type=parse_positive_duration,
        metavar="DURATION",
        help="per test and step: time spent adding pairs while undecided before the "
        "commit is skipped (--webperf-against-budget; default its own, 60s)",
    )
    bisect.set_defaults(func=cmd_bisect)
    trend = sub.add_parser(
        "history",
        help="draw a verdict history (--webperf-history) per test and flag its change points",
    )
    trend.add_argument("path", help="the history file (JSON lines)")
    trend.add_argument("-o", "--output", default="webperf-history.html")
    trend.set_defaults(func=cmd_history)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in given:  # webperf bisect GOOD BAD -- pytest args
        at = given.index("--")
        given, rest = given[:at], given[at + 1 :]
    args = parser().parse_args(given)
    if rest and args.command != "bisect":
        parser().error(f"arguments after -- are for webperf bisect only: {' '.join(rest)}")
    args.pytest_args = rest
    try:
        return int(args.func(args))
    except WebperfError as exc:
        print(f"webperf: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
