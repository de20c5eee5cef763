import subprocess
import sys
from pathlib import Path

import pytest

from pytest_webperf.errors import OptionError
from pytest_webperf.report.table import mqtt_lines
from pytest_webperf.targets.base import is_loopback, split_url
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.targets.container import ContainerTarget, stopped
from pytest_webperf.targets.process import ProcessTarget, how_it_ended


def test_env_goes_to_the_part_it_names():
    target = ContainerTarget(
        Catalog(default_directories()),
        "go-mqtt",
        env={"mosquitto.MOSQUITTO_MAX_INFLIGHT_MESSAGES": "20", "DB_POOL": "8"},
    )
    assert target.part_env["mosquitto"] == {"MOSQUITTO_MAX_INFLIGHT_MESSAGES": "20"}
    assert target.part_env["go-mqtt"] == {"DB_POOL": "8"}


def test_env_for_an_unknown_part_names_the_parts():
    with pytest.raises(OptionError, match=r"no part 'mosquito'.*mosquitto"):
        ContainerTarget(Catalog(default_directories()), "go-mqtt", env={"mosquito.X": "1"})


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("10.0.0.1", False),
        ("192.168.1.1", False),
        ("example.com", False),
        ("0.0.0.0", False),
    ],
)
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_split_url():
    assert split_url("http://127.0.0.1:8080/x") == ("http", "127.0.0.1", 8080)
    assert split_url("http://localhost") == ("http", "localhost", 80)
    with pytest.raises(ValueError):
        split_url("ftp://127.0.0.1")


def test_mqtt_lines_say_where_messages_went():
    delivery = {
        "delivered": 10,
        "lost": 1,
        "duplicates": 0,
        "backlog": 0,
        "latency": {"p50_ms": 1.5, "p99_ms": 9.25},
    }
    entry = {
        "nodeid": "t::m",
        "name": "MQTT",
        "repetitions": [
            {
                "repetition": 1,
                "mqtt": {
                    "users": 5,
                    "qos": 2,
                    "published": 11,
                    "acked": 11,
                    "observer": delivery,
                    "store": None,
                    "tps": 3.2,
                },
            },
            {"repetition": 2},
        ],
    }
    (line,) = mqtt_lines([entry])
    assert "published 11" in line and "observer got 10 (lost 1, dup 0" in line
    assert "p50/p99 1.5/9.2 ms" in line or "p50/p99 1.5/9.3 ms" in line


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (
            {"Status": "exited", "ExitCode": 137, "OOMKilled": True},
            "OOM-killed: it reached its memory limit; status exited, exit code 137",
        ),
        (
            {"Status": "exited", "ExitCode": 137, "OOMKilled": False},
            "killed by SIGKILL; status exited, exit code 137",
        ),
        ({"Status": "exited", "ExitCode": 3}, "status exited, exit code 3"),
        ({"Status": "exited", "ExitCode": 255}, "status exited, exit code 255"),
    ],
)
def test_a_stopped_container_says_why(state: dict[str, object], said: str) -> None:
    assert stopped(state) == said


@pytest.mark.parametrize(
    ("returncode", "said"),
    [(-9, "killed by SIGKILL"), (-15, "killed by SIGTERM"), (3, "exit code 3"), (-99, "signal 99")],
)
def test_a_stopped_process_says_how_it_ended(returncode: int, said: str) -> None:
    assert said in how_it_ended(returncode)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()


def test_a_process_target_names_the_commit_of_its_working_directory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "app" / "server.py").write_text("print('v1')\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "v1")
    head = git(repo, "rev-parse", "HEAD")

    target = ProcessTarget("python server.py", cwd=str(repo / "app"))  # never started
    assert target.describe()["git"] == {"commit": head, "dirty": False}

    (repo / "app" / "server.py").write_text("print('v2')\n")
    assert target.describe()["git"] == {"commit": head, "dirty": False}  # asked once
    assert ProcessTarget("python server.py", cwd=str(repo)).describe()["git"] == {
        "commit": head,
        "dirty": True,
    }


def test_a_process_target_outside_a_repository_has_no_commit(tmp_path: Path) -> None:
    assert ProcessTarget("python server.py", cwd=str(tmp_path)).describe()["git"] is None


NODE_LIKE = """
import http.server, os, pathlib
pathlib.Path(f"/tmp/perf-{os.getpid()}.map").write_text("1000 10 JS:*handler /app.js:1\\n")


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Health).serve_forever()
"""


@pytest.mark.parametrize("asked", [True, False])
def test_the_perf_map_a_profiled_process_wrote_on_this_host_goes_with_it(
    tmp_path: Path, asked: bool
) -> None:
    (tmp_path / "server.py").write_text(NODE_LIKE)
    env = {"NODE_OPTIONS": "--perf-basic-prof --interpreted-frames-native-stack"} if asked else {}
    with ProcessTarget([sys.executable, "server.py"], cwd=str(tmp_path), env=env) as target:
        assert target.process is not None
        written = Path(f"/tmp/perf-{target.process.pid}.map")
        assert written.exists()
    try:
        assert written.exists() is not asked  # only the maps webperf asked V8 for
    finally:
        written.unlink(missing_ok=True)
