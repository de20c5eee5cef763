"""HTTPS settings given by a user: ``tls_ca=``, an https:// target URL, and the words of a
health check that meets the other protocol (no sockets here: the e2e tests have them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture.arguments import check_connection_reuse, check_tls_ca
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Probe, health_failure, wait_healthy
from pytest_webperf.targets.external import ExternalTarget


def test_tls_ca_is_a_readable_file_for_an_https_target(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert check_tls_ca(None, "http://127.0.0.1:1", "native") is None
    assert check_tls_ca(ca, "https://127.0.0.1:1", "native") == str(ca.resolve())
    assert check_tls_ca(str(ca), "https://127.0.0.1:1", "lean") == str(ca.resolve())
    with pytest.raises(OptionError, match=r"tls_ca=.*no such file"):
        check_tls_ca(tmp_path / "missing.pem", "https://127.0.0.1:1", "native")
    with pytest.raises(OptionError, match=r"tls_ca=\.\.\.\): a path to a CA file"):
        check_tls_ca(3, "https://127.0.0.1:1", "native")
    with pytest.raises(OptionError, match="does not speak TLS"):
        check_tls_ca(ca, "http://127.0.0.1:1", "native")
    with pytest.raises(OptionError, match="fast user does not verify"):
        check_tls_ca(ca, "https://127.0.0.1:1", "fast")


def test_an_https_target_url_is_accepted_with_its_default_port() -> None:
    target = ExternalTarget("https://127.0.0.1")
    assert (target.host, target.port, target.tls) == ("127.0.0.1", 443, True)
    assert target.url == "https://127.0.0.1:443"
    assert not ExternalTarget("http://127.0.0.1:8080").tls
    with pytest.raises(OptionError, match="--webperf-target-url"):
        ExternalTarget("ftp://127.0.0.1")


def test_the_ca_file_travels_to_the_swarm_child() -> None:
    spec = SwarmSpec(host="https://127.0.0.1:8443", users=1, duration_s=1, tls_ca="/ca.pem")
    assert SwarmSpec.from_dict(spec.to_dict()) == spec
    plain = SwarmSpec(host="http://127.0.0.1:8080", users=1, duration_s=1)
    assert SwarmSpec.from_dict(plain.to_dict()).tls_ca is None


def test_a_wrong_protocol_ends_the_wait_at_once_with_one_line() -> None:
    seen = Probe(
        ready=False,
        final=True,
        detail="the server answered with a TLS alert: is it HTTPS? (tls=True)",
        wrong_protocol=True,
    )
    probes = []

    def probe() -> Probe:
        probes.append(1)
        return seen

    answer = wait_healthy(probe, lambda: None, timeout=60, settle=30)
    assert answer is seen and len(probes) == 1  # no settling, no timeout
    message = health_failure("srv", "/health on 127.0.0.1:1", answer, 60, "fix it")
    assert message == (
        "srv: the health check /health on 127.0.0.1:1: the server answered with a TLS alert: "
        "is it HTTPS? (tls=True)"
    )


def test_keepalive_false_says_connection_close_and_tls_resume_needs_it() -> None:
    https, http = "https://127.0.0.1:1", "http://127.0.0.1:1"
    assert check_connection_reuse(True, False, https, "native", None) is None
    assert check_connection_reuse(True, False, http, "lean", {"X": "1"}) == {"X": "1"}
    assert check_connection_reuse(False, False, http, "native", {"connection": "keep-alive"}) == {
        "Connection": "close"
    }
    assert check_connection_reuse(False, True, https, "lean", None) == {"Connection": "close"}
    with pytest.raises(OptionError, match=r"keepalive=\.\.\.\): True or False, not 'no'"):
        check_connection_reuse("no", False, https, "native", None)
    with pytest.raises(OptionError, match=r"tls_resume=True.*keepalive=False"):
        check_connection_reuse(True, True, https, "native", None)
    with pytest.raises(OptionError, match=r"tls_resume=True.*https://"):
        check_connection_reuse(False, True, http, "native", None)
    with pytest.raises(OptionError, match="fast user does not resume"):
        check_connection_reuse(False, True, https, "fast", None)


def test_keepalive_false_closes_every_entry_of_a_mix() -> None:
    from pytest_webperf.fixture.arguments import closing
    from pytest_webperf.fixture.http import request

    entry = closing(request("/a", headers={"Connection": "keep-alive", "X-A": "1"}))
    assert entry.headers == (("X-A", "1"), ("Connection", "close"))
