"""HotSpot's dynamic attach from the host, with no JDK on the host and none in the
target's image (a JRE has no ``jcmd``): the few lines of the protocol ``jcmd`` speaks,
used to ask a JVM for its perf map (``Compiler.perfmap``, JDK 17+: the JVM writes
``/tmp/perf-<its pid>.map`` of its compiled methods, read by ``perfmap``).

Why this and not async-profiler or perf-map-agent: no agent is loaded into the server
under test, nothing is downloaded at run time, and one tool (perf) and one folding path
serve every runtime; the leaves (self time, what the diff ranks by) are named. An
inlined method is counted in its caller, and interpreted frames are ``Interpreter``
(async-profiler, an agent, attributes both; measured at the same cost per sample).

The protocol, as HotSpot implements it on Linux:

1. the attacher creates ``.attach_pid<ns pid>`` in the JVM's ``/tmp`` and sends
   ``SIGQUIT``; a JVM that finds the file starts its attach listener instead of
   printing a thread dump;
2. the listener makes the socket ``/tmp/.java_pid<ns pid>``; the attacher connects
   (HotSpot accepts a peer of its own uid, or root);
3. request ``"1\\0" command "\\0" arg1 "\\0" arg2 "\\0" arg3 "\\0"`` (three arguments,
   always); response: the status as a decimal line, then the command's output.

Everything goes through ``/proc/PID/root``, so a JVM in a container is attached from
the host without entering its namespaces (root on the host is root for the JVM: no
user namespace in a default Docker). **Never** is SIGQUIT sent to a process that is not
a HotSpot JVM (it would dump core): ``is_hotspot`` checks ``libjvm.so`` in its maps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

from pytest_webperf.profiling.perfmap import namespace_pid

ATTACH_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 30.0  # Compiler.perfmap of a large code cache takes a while


class AttachError(Exception):
    """The JVM did not answer, or answered with an error status."""


def is_hotspot(pid: int) -> bool:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
    return "/libjvm.so" in maps


def attach(pid: int, command: str, *args: str, timeout: float = ATTACH_TIMEOUT_S) -> str:
    """Send one attach command to the JVM ``pid`` (a host pid); its output."""
    if len(args) > 3:
        raise ValueError("three arguments at most")
    if not is_hotspot(pid):
        raise AttachError(f"{pid} is not a HotSpot JVM")
    inner = namespace_pid(pid)
    root = Path(f"/proc/{pid}/root/tmp")
    sock_path = root / f".java_pid{inner}"
    if not sock_path.exists():
        _start_listener(pid, root / f".attach_pid{inner}", sock_path, timeout)
    request = b"1\0" + b"".join(s.encode() + b"\0" for s in (command, *args, "", "", "")[:4])
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(REPLY_TIMEOUT_S)
        try:
            conn.connect(str(sock_path))
            conn.sendall(request)
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except OSError as exc:
            raise AttachError(f"JVM {pid}: {exc}") from None
    status, _, output = b"".join(chunks).decode(errors="replace").partition("\n")
    if status.strip() != "0":
        raise AttachError(f"{command} {' '.join(args)}: status {status.strip()}: {output[:200]}")
    return output


def _start_listener(pid: int, trigger: Path, sock_path: Path, timeout: float) -> None:
    try:
        trigger.touch()
    except OSError as exc:
        raise AttachError(f"JVM {pid}: cannot create {trigger.name} ({exc})") from None
    try:
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + timeout
        while not sock_path.exists():
            if time.monotonic() > deadline:
                raise AttachError(
                    f"JVM {pid} opened no attach socket in {timeout:g}s "
                    "(-XX:+DisableAttachMechanism?)"
                )
            time.sleep(0.02)
    finally:
        with contextlib.suppress(OSError):
            trigger.unlink()


def write_perfmap(pid: int) -> None:
    """Ask the JVM ``pid`` to write its perf map (JDK 17+; ``AttachError`` otherwise)."""
    attach(pid, "jcmd", "Compiler.perfmap")
