"""Builds catalogue images, once per content hash."""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable

import docker.errors

from pytest_webperf.catalog import Catalog, ServerSpec, build_context, image_tag
from pytest_webperf.engine import docker_client
from pytest_webperf.errors import CatalogError

Log = Callable[[str], None]
_lock = threading.Lock()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def image_exists(tag: str) -> bool:
    try:
        docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(spec: ServerSpec, log: Log = _stderr) -> str:
    """The image tag for ``spec``, built first when no image has that content hash."""
    tag = image_tag(spec)
    with _lock:
        if image_exists(tag):
            return tag
        log(f"webperf: building image {tag} from {spec.directory}")
        started = time.monotonic()
        output: list[str] = []
        stream = docker_client().api.build(
            fileobj=io.BytesIO(build_context(spec)),
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            decode=True,
            labels={"webperf.server": spec.name},
        )
        for chunk in stream:
            if "stream" in chunk:
                output.append(str(chunk["stream"]))
            if "error" in chunk:
                tail = "".join(output)[-4000:]
                raise CatalogError(
                    f"building {spec.name} ({spec.directory / 'Dockerfile'}) failed: "
                    f"{chunk['error']}\n--- build output (tail) ---\n{tail}"
                )
        log(f"webperf: built {tag} in {time.monotonic() - started:.0f}s")
        return tag


def ensure_images(catalog: Catalog, name: str, log: Log = _stderr) -> dict[str, str]:
    """Images for ``name`` and everything it depends on: server name -> tag."""
    return {
        spec.name: ensure_image(catalog.image_spec(spec), log) for spec in catalog.closure(name)
    }
