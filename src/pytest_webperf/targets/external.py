"""A server that is already up, given by URL (no engine needed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.targets.base import is_loopback, split_url
from pytest_webperf.targets.http2 import probe_health


class ExternalTarget:
    """Loads ``url`` as it is. Non-loopback hosts need an explicit opt-in: a load test
    aimed at someone else's server is an attack."""

    def __init__(
        self, url: str, *, name: str = "external", allow_remote: bool = False, health: str = "/"
    ) -> None:
        try:
            scheme, host, port = split_url(url)
        except ValueError as exc:
            raise OptionError(f"--webperf-target-url: {exc}") from None
        if not allow_remote and not is_loopback(host):
            raise OptionError(
                f"--webperf-target-url={url} is not a loopback address. Load tests go to "
                "127.0.0.0/8 unless you pass --webperf-allow-remote-target, and only against "
                "servers you own."
            )
        self.name, self.host, self.port, self.health = name, host, port, health
        self.tls = scheme == "https"  # its certificate is not verified (tls_ca= verifies)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def __enter__(self) -> ExternalTarget:
        option = "https:// in --webperf-target-url"
        answer = probe_health(
            self.host, self.port, self.health, tls=self.tls, tls_option=option, timeout=5.0
        )
        if answer.wrong_protocol:
            raise TargetError(f"{self.url}{self.health}: {answer.detail}")
        if not answer.ready:
            raise TargetError(f"{self.url}{self.health} does not answer with a 2xx status")
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def parts(self) -> Mapping[str, int]:
        return {}

    def check_alive(self) -> None:
        if not probe_health(self.host, self.port, self.health, tls=self.tls, timeout=5.0).ready:
            raise TargetError(f"{self.url} stopped answering during the run")

    def logs(self) -> str:
        return ""

    def describe(self) -> dict[str, Any]:
        return {"kind": "external", "url": self.url}
