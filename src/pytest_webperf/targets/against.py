"""The base of an A/B run (``--webperf-against=REF``): the ref's tree, its catalogue,
and, once per target, whether it changed since (``Against.pair``: the one place that
decides whether a target is measured against its base, alone, or not at all)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.catalog import Catalog, ServerSpec, context_hash
from pytest_webperf.targets.gitref import BaseTree, Watch, base_tree
from pytest_webperf.targets.paired import PairedTarget


class Unchanged(Exception):
    """The test's targets are the same at the base ref: not measured (reported ``unchanged``)."""


@dataclass
class Against:
    """The base of this run: the ref's tree, its catalogue, and what changed since."""

    tree: BaseTree
    catalog: Catalog  # the working tree's catalogue (B)
    always: bool = False  # measure unchanged targets too (A/A)

    @cached_property
    def base_catalog(self) -> Catalog:
        """The same catalogue directories as they are at the ref (a directory that did
        not exist there is left out; one outside the repository is the same on both)."""
        directories = []
        for directory in self.catalog.directories:
            mapped = self.tree.map(directory) if self.tree.relative(directory) else directory
            if mapped is not None and mapped.is_dir():
                directories.append(mapped)
        return Catalog(directories)

    def has_server(self, name: str) -> bool:
        return name in self.base_catalog.names()

    def server_changed(self, name: str) -> bool:
        """Whether anything that builds or configures ``name`` (its image, the images and
        settings of what it depends on, the paths its ``watch`` names) differs at the base
        ref. A server the ref does not have is changed."""
        try:
            base = {s.name: s for s in self.base_catalog.closure(name)}
        except CatalogError:
            return True
        for spec in self.catalog.closure(name):
            other = base.get(spec.name)
            if other is None or self._fingerprint(self.catalog, spec.name) != self._fingerprint(
                self.base_catalog, other.name
            ):
                return True
            watch = self._watch(spec)
            if watch is not None and self.tree.differs(watch):
                return True
        return False

    def _watch(self, spec: ServerSpec) -> Watch | None:
        """A server's ``watch`` (server.toml) as pathspecs; None when it names none. A
        server outside the repository watches nothing in it."""
        paths = [(spec.directory / p).resolve() for p in spec.watch]
        inside = [self.tree.spec(p) for p in paths if self.tree.relative(p) is not None]
        return Watch(tuple(inside)) if inside else None

    def server_compared(self, name: str) -> str:
        """What ``server_changed`` compares, for the unchanged line."""
        watched = [spec.directory / p for spec in self.catalog.closure(name) for p in spec.watch]
        extra = f", and {', '.join(str(p) for p in watched)}" if watched else ""
        return f"its image's build context, settings and dependencies{extra}"

    @staticmethod
    def _fingerprint(catalog: Catalog, name: str) -> tuple[str, str]:
        spec = catalog.get(name)
        settings = repr(
            (spec.env, spec.depends, spec.cpus, spec.memory, spec.health, spec.extra, spec.port_env)
        )
        return context_hash(catalog.image_spec(spec)), settings

    def describe(self) -> dict[str, object]:
        return self.tree.describe()

    def pair(
        self,
        change: Target,
        *,
        changed: bool,
        start_base: Callable[[], Target | None] | None,
        compared: str,
    ) -> PairedTarget:
        """``change`` (B, started) with its base (A): the one place it is decided whether
        a target is measured against its base. One the base does not have (no
        ``start_base``, or one that starts nothing) is measured alone; an unchanged one
        (nothing in ``compared`` differs) is not measured (reported ``unchanged``) unless
        ``always``; otherwise its base is started beside it."""
        if start_base is None:
            return PairedTarget(change, None, changed=True, compared=compared)
        if not changed and not self.always:
            return PairedTarget(change, None, changed=False, compared=compared)
        base = start_base()
        return PairedTarget(change, base, changed=changed or base is None, compared=compared)


@contextmanager
def against(rootdir: Path, ref: str, catalog: Catalog, *, always: bool) -> Iterator[Against]:
    with base_tree(rootdir, ref) as tree:
        yield Against(tree, catalog, always=always)
