"""The ``webperf`` command: build the catalogue's images, list servers."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_webperf.catalog import Catalog, default_directories
from pytest_webperf.errors import WebperfError
from pytest_webperf.images import ensure_images


def _catalog(args: argparse.Namespace) -> Catalog:
    return Catalog(default_directories([Path(d) for d in args.servers]))


def cmd_build(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    names = args.names or catalog.names()
    started = time.monotonic()
    for name in names:
        for server, tag in ensure_images(catalog, name).items():
            print(f"{server:16} {tag}")
    print(f"{len(names)} server(s) ready in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for spec in _catalog(args):
        print(f"{spec.name:16} {spec.kind:5} {spec.description}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="webperf", description=__doc__)
    top.add_argument("--servers", action="append", default=[], metavar="DIR",
                     help="extra server catalogue directory (repeatable)")
    sub = top.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build server images (cached by content hash)")
    build.add_argument("names", nargs="*", help="servers to build (default: all)")
    build.set_defaults(func=cmd_build)
    sub.add_parser("list", help="list the catalogue").set_defaults(func=cmd_list)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except WebperfError as exc:
        print(f"webperf: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
