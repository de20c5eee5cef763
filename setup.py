"""Build steps: ship the server catalogue inside the package; compile the native loop.

``servers/`` stays at the repository's root, where the suites, the tests and the
README refer to it, and is not duplicated in git. A wheel gets a copy as
``pytest_webperf/servers/``, which ``catalog.BUILTIN_DIR`` finds first; an editable
install copies nothing and uses the checkout's ``servers/``. Everything else is in
pyproject.toml.

Why a build step rather than configuration: mapping ``servers/`` to a package with
``package-dir`` needs an explicit ``packages`` list (``packages.find`` cannot add a
directory outside ``src/``), and a forgotten subpackage would then silently be
missing from the wheel; a symlink in ``src/`` breaks on Windows checkouts and in
the sdist.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

CATALOGUE = Path(__file__).resolve().parent / "servers"


def catalogue_files() -> list[Path]:
    if not (CATALOGUE / "nginx" / "server.toml").is_file():
        raise SystemExit(f"{CATALOGUE}: the server catalogue is missing; the wheel would ship none")
    return [
        path
        for path in sorted(CATALOGUE.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]


class BuildPyWithCatalogue(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the checkout's servers/ is used where it is
            return
        target = Path(self.build_lib, "pytest_webperf", "servers")
        for path in catalogue_files():
            dest = target / path.relative_to(CATALOGUE)
            self.mkpath(str(dest.parent))
            self.copy_file(str(path), str(dest))  # keeps the mode: start.sh stays executable


# The native engine (swarm/native/: epoll, so Linux only), one extension of every
# protocol's session. Optional: where it cannot be compiled the wheel has none and the
# plugin uses the pure-Python users (lean, paho).
# WEBPERF_PURE=1 builds without it (the release's py3-none-any wheel, next to the
# compiled manylinux ones).
def openssl_found() -> bool:
    """Whether OpenSSL's headers are here (Debian: libssl-dev): the native loop then speaks
    TLS, linked with -lssl -lcrypto; without them it is built without TLS (https targets
    then get the lean user, said once). WEBPERF_NO_TLS=1 builds without it anyway."""
    if os.environ.get("WEBPERF_NO_TLS") == "1":
        return False
    roots = [os.environ.get("OPENSSL_DIR", ""), sys.prefix, "/usr", "/usr/local"]
    return any(Path(root, "include", "openssl", "ssl.h").is_file() for root in roots if root)


def nghttp2_found() -> bool:
    """Whether libnghttp2's headers are here (Debian: libnghttp2-dev): the native loop then
    speaks HTTP/2 (swarm/native/h2.c, its session), linked with -lnghttp2; without
    them ``http2=True`` and ``webperf.grpc`` say what to install. WEBPERF_NO_H2=1 builds
    without it anyway."""
    if os.environ.get("WEBPERF_NO_H2") == "1":
        return False
    roots = [os.environ.get("NGHTTP2_DIR", ""), sys.prefix, "/usr", "/usr/local"]
    return any(Path(root, "include", "nghttp2", "nghttp2.h").is_file() for root in roots if root)


TLS = openssl_found()
H2 = nghttp2_found()
NATIVE_DIR = Path("src", "pytest_webperf", "swarm", "native")
NATIVE = [
    Extension(
        "pytest_webperf.swarm._hotloop",
        [
            str(NATIVE_DIR / name)
            for name in ("engine.c", "python.c", "http1.c", "mqtt.c", "ws.c", "sse.c")
            + (("h2.c",) if H2 else ())
        ],
        depends=[str(NATIVE_DIR / "engine.h")],
        extra_compile_args=["-O2", "-std=gnu11", "-fvisibility=hidden"],
        define_macros=([("WEBPERF_TLS", "1")] if TLS else [])
        + ([("WEBPERF_H2", "1")] if H2 else []),
        libraries=(["ssl", "crypto"] if TLS else []) + (["nghttp2"] if H2 else []),
        optional=True,
    ),
]

setup(
    cmdclass={"build_py": BuildPyWithCatalogue},
    ext_modules=NATIVE
    if sys.platform.startswith("linux") and os.environ.get("WEBPERF_PURE") != "1"
    else [],
)
