"""Errors a user can cause, each with a message that names the input and the fix.

WebperfError                 base; anything below is reported without a traceback
├── OptionError              a bad --webperf-* value, ini value or marker argument
├── CatalogError             a missing or malformed servers/<name>/server.toml
├── EngineUnavailable        no Docker engine answers (says how to get one)
├── TargetError              a target did not start, was unhealthy or died (carries its logs)
│   └── ProtocolError        it does not speak the protocol the load asks for (HTTP/2)
├── SwarmError               the load generator failed (carries its stderr)
└── BaselineError            a baseline file that cannot be read or written (names the file)

A traceback is for our own bugs only.
"""

from __future__ import annotations


class WebperfError(Exception):
    """Base of every error a user can cause."""


class OptionError(WebperfError):
    """A bad option, ini or marker value."""


class CatalogError(WebperfError):
    """A server catalogue entry that cannot be used."""


class EngineUnavailable(WebperfError):
    """No container engine answers."""


class TargetError(WebperfError):
    """A target that did not start, did not become healthy, or died."""

    def __init__(self, message: str, logs: str = "") -> None:
        self.logs = logs
        if logs:
            tail = "\n".join(logs.rstrip().splitlines()[-40:])
            message = f"{message}\n--- last lines of the server's log ---\n{tail}"
        super().__init__(message)


class ProtocolError(TargetError):
    """A target that does not speak the protocol a load asks of it (HTTP/2, gRPC)."""


class SwarmError(WebperfError):
    """The load generator failed."""


class BaselineError(WebperfError):
    """A baseline file that cannot be read or written."""
