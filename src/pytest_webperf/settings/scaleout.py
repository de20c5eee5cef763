"""Generator workers on other machines, from the pytest side: the options' values,
the ``Remote`` part of a run's swarm with its secret (and the refusal to listen beyond
loopback without one), the end-of-session farewell to the workers.

The workers themselves: ``webperf worker`` (``swarm/supervisor.py``) and the
master that waits for them (``swarm/child/master.py``).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from pytest_webperf.errors import OptionError
from pytest_webperf.swarm.runner import child_environment
from pytest_webperf.swarm.spec import Remote, split_address
from pytest_webperf.swarm.trust.secret import secret_of

FAREWELL_S = 10.0  # how long the session's end listens for the workers to say goodbye to


def parse_address(text: str) -> str:
    """``HOST:PORT`` (where the swarm's master listens for remote workers)."""
    split_address(text)
    return str(text).strip()


def parse_bind_host(text: str) -> str:
    """The IP address a started target listens on, and the one every worker loads (so
    not 0.0.0.0: the machine's address on the workers' network, e.g. 10.0.0.5)."""
    try:
        address = ipaddress.ip_address(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address (example: 10.0.0.5)") from None
    if address.version != 4:
        raise ValueError(
            f"{text!r}: only IPv4 addresses are supported for now (the catalogue's servers "
            "and the target URL take an IPv4 address; example: 10.0.0.5)"
        )
    if address.is_unspecified:
        raise ValueError(
            f"{text!r} is no address to load: give this machine's address on the "
            "workers' network (example: 10.0.0.5)"
        )
    return str(address)


def remote_of(config: Any, environ: Mapping[str, str] = os.environ) -> Remote | None:
    """The run's remote workers (a ``RunConfig``) with the secret they must hold (its
    file, else ``WEBPERF_SECRET``), or None without any; OptionError if the secret
    cannot be read or the master may not listen at its address without one."""
    if not config.remote_workers:
        return None
    try:
        secret = secret_of(config.secret_file, environ)
    except ValueError as exc:  # it names the file, or WEBPERF_SECRET
        where = config.sources.get("secret_file", "--webperf-secret-file")
        raise OptionError(f"{where}: {exc}" if config.secret_file else str(exc)) from None
    remote = Remote(
        config.remote_workers,
        config.master_bind,
        config.remote_wait,
        config.trusted_network,
        secret=secret,
    )
    unguarded = remote.unguarded(secret)
    if unguarded is not None:
        raise OptionError(unguarded)
    return remote


def farewell(remote: Remote, wait_s: float = FAREWELL_S) -> str:
    """Tell the remote workers the session is over (their ``webperf worker`` exits);
    what the farewell said, or why it could not."""
    command = [sys.executable, "-m", "pytest_webperf.swarm", "--farewell", remote.bind]
    command += ["--count", str(remote.workers), "--wait", str(wait_s)]
    try:
        done = subprocess.run(
            command,
            check=False,
            capture_output=True,
            text=True,
            timeout=wait_s + 30,
            env=child_environment(remote),
        )
    except subprocess.TimeoutExpired:
        return "the farewell to the remote workers did not end"
    return (done.stdout.strip() or done.stderr.strip()[-300:]).splitlines()[-1:][0]
