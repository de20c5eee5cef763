"""``webperf build worker``: the container image of a remote generator worker.

The image is ``debian:bookworm-slim`` (the catalogue's base) with Python 3 and this
package installed from a pure wheel built here from the project's source tree, beside
its dependencies' wheels fetched here (the build needs no package index). The native
engine (``swarm/native/``: the engine and its protocols' sessions, TLS and HTTP/2 with
them) is compiled inside the image, for the image's own Python, so the worker has it
whatever Python built the wheel; the build fails if it does not import. The
entry point is ``webperf worker``, so ``docker run --network host IMAGE --master
HOST:PORT`` is a worker. Tagged ``webperf/worker:<hash of the context>``, built once per
content.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.images import Log, _stderr, build, image_exists

REPOSITORY = "webperf/worker"
PLATFORMS = ("manylinux_2_28", "manylinux_2_17", "manylinux2014", "manylinux_2_5", "linux")
NATIVE_DIR = ("src", "pytest_webperf", "swarm", "native")
# the native engine compiled in the image: its module and its C files (its header beside)
NATIVE = {"_hotloop": ("engine.c", "python.c", "http1.c", "h2.c", "mqtt.c", "ws.c", "sse.c")}
HEADERS = ("engine.h",)  # included, not compiled alone
DOCKERFILE = """\
FROM debian:bookworm-slim AS native
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      gcc libc6-dev python3-dev libssl-dev libnghttp2-dev \\
 && rm -rf /var/lib/apt/lists/*
COPY native/ /build/
# as setup.py compiles them (-O2 -std=gnu11, TLS with OpenSSL, HTTP/2 with libnghttp2),
# for this image's Python
RUN cd /build && for module in _hotloop; do \\
      sources=$(cat "$module.sources") \\
 && gcc -O2 -std=gnu11 -fPIC -shared -pthread -fvisibility=hidden -DWEBPERF_TLS=1 \\
      -DWEBPERF_H2=1 $(python3-config --includes) $sources -lssl -lcrypto -lnghttp2 \\
      -o "$module$(python3-config --extension-suffix)" || exit 1; \\
    done && rm -f *.c *.h *.sources

FROM debian:bookworm-slim
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      python3 python3-venv ca-certificates libssl3 libnghttp2-14 \\
 && rm -rf /var/lib/apt/lists/*
COPY wheels/ /wheels/
RUN python3 -m venv /opt/webperf \\
 && /opt/webperf/bin/pip install --no-cache-dir --no-index --find-links /wheels \\
      pytest-webperf \\
 && rm -rf /wheels
COPY --from=native /build/ /tmp/native/
RUN swarm=$(/opt/webperf/bin/python -c \\
      'import os, pytest_webperf.swarm as s; print(os.path.dirname(s.__file__))') \\
 && cp /tmp/native/*.so "$swarm/" && rm -rf /tmp/native \\
 && /opt/webperf/bin/python -c \\
      'import pytest_webperf.swarm._hotloop'
USER nobody
ENTRYPOINT ["/opt/webperf/bin/webperf", "worker"]
"""


def project_root() -> Path:
    """The source tree this package runs from (an editable or source install)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file():
        raise CatalogError(
            "webperf build worker builds the image from the project's source tree, and "
            f"this installation has none ({root}): install it from a checkout (pip install -e .)"
        )
    return root


def wheelhouse(root: Path, into: Path) -> list[Path]:
    """The package's wheel, built from ``root``, and the wheels of its dependencies for
    the image's Python (Debian bookworm's 3.11, this machine's architecture), fetched
    here by pip: the image build itself needs no package index."""
    # the same files, the same wheel; pure (py3-none-any), so it installs on the image's
    # Python whichever Python builds it: the native loop is compiled in the image
    env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800", "WEBPERF_PURE": "1"}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    steps = [
        [*pip, "wheel", "--no-deps", "--quiet", "-w", str(into), str(root)],
        [*pip, "download", "--quiet", "--only-binary=:all:", "-d", str(into)]
        + ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
        + [arg for tag in PLATFORMS for arg in ("--platform", f"{tag}_{platform.machine()}")],
    ]
    for index, command in enumerate(steps):
        if index == 1:
            command.append(str(next(into.glob("pytest_webperf-*.whl"))))
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, check=False, timeout=900
        )
        if done.returncode != 0:
            raise CatalogError(f"gathering the worker's wheels failed:\n{done.stderr[-3000:]}")
    return sorted(into.glob("*.whl"))


def native_files(swarm: Path) -> list[tuple[str, bytes]]:
    """The native engine's sources for the image's build stage, and their list."""
    names = [name for sources in NATIVE.values() for name in sources] + list(HEADERS)
    files = [(f"native/{name}", (swarm / name).read_bytes()) for name in names]
    files += [(f"native/{m}.sources", " ".join(s).encode()) for m, s in NATIVE.items()]
    return files


def context(wheels: list[Path], swarm: Path) -> tuple[bytes, str]:
    """The build context (Dockerfile, the wheels, the native engine's C sources) and the
    image's tag."""
    files = [("Dockerfile", DOCKERFILE.encode()), *native_files(swarm)]
    files += [(f"wheels/{wheel.name}", wheel.read_bytes()) for wheel in wheels]
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in files:
            digest.update(name.encode() + b"\0" + content)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, 0
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue(), f"{REPOSITORY}:{digest.hexdigest()[:16]}"


def ensure_worker_image(log: Log = _stderr) -> str:
    """The worker image's tag, built first when no image has that content."""
    with tempfile.TemporaryDirectory(prefix="webperf-worker-") as tmp:
        root = project_root()
        tar, tag = context(wheelhouse(root, Path(tmp)), root.joinpath(*NATIVE_DIR))
    if image_exists(tag):
        return tag
    log(f"webperf: building image {tag} (the remote generator worker)")
    build(tar, tag, label="worker", what=tag)
    return tag
