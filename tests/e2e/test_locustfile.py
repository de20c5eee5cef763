"""The user's own Locust users under the gate (``webperf.locust``), end to end through
pytest with a real process target: a locustfile's request names, its A/B gate against a
git ref, a LoadTestShape refused, a task's exception shown, pacing from the intended start.

The server (``asyncio_server``) does deterministic CPU work per request (sha256 rounds,
never a sleep), so a change that triples it is a regression no noise can hide.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.asyncio_server import STALLING_SERVER, asyncio_server
from tests.e2e.gitrepo import commit_base, git

pytest_plugins = ["pytester"]

WORK = 1500  # sha256 rounds per request (~0.5 ms of CPU)
SERVER = asyncio_server(
    """
    WORK = int(open("work.txt").read())

    def respond():
        digest = b"x"
        for _ in range(WORK):
            digest = hashlib.sha256(digest).digest()
        return digest.hex().encode()
    """
)
SHOP = """
from locust import FastHttpUser, task


class Shop(FastHttpUser):
    @task(3)
    def browse(self):
        self.client.get("/page", name="page")

    @task
    def buy(self):
        self.client.post("/cart", data=b"{}", name="cart")
"""
TEST = """
import sys


def test_shop(webperf):
    target = webperf.process([sys.executable, "server.py"], name="shop")
    result = webperf.locust(target, "locustfile.py", concurrency=4)
    assert result.name == "locustfile.py: Shop"
"""
RUN = [
    "-p",
    "no:locust",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=3",
    "--webperf-json=out.json",
]


def entry(pytester: pytest.Pytester) -> Any:
    (found,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return found


@pytest.fixture
def shop(pytester: pytest.Pytester) -> Path:
    """A git repository with the server, its locustfile and a test of it."""
    pytester.makepyfile(server=SERVER, locustfile=SHOP, test_shop=TEST)
    (pytester.path / "work.txt").write_text(str(WORK))
    commit_base(pytester.path)
    return pytester.path


def test_a_locustfile_with_two_names_is_gated_against_its_base(
    pytester: pytest.Pytester, shop: Path
) -> None:
    (shop / "work.txt").write_text(str(3 * WORK))  # three times the work per request
    # the base runs its own locustfile (the same path in its tree): this one would fail
    (shop / "locustfile.py").write_text(SHOP.replace('name="cart"', 'name="checkout"'))
    git(shop, "commit", "-q", "-am", "slower")
    result = pytester.runpytest_subprocess(  # 4 pairs: a margin on a busy shared machine
        *RUN,
        "--webperf-repeat=4",
        "--webperf-against=HEAD~1",
        "--webperf-against-budget=1s",
        timeout=300,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]locustfile.py: Shop on shop[]] cpu_per_req * -> *"])
    found = entry(pytester)
    assert found["name"] == "locustfile.py: Shop"
    assert found["workload"]["users"] == "locustfile.py: Shop"
    assert found["workload"]["path"] == ""  # no request path pretends to be what ran
    assert found["verdict"]["status"] == "regression"
    cpu = next(c for c in found["verdict"]["checks"] if c["metric"] == "cpu_per_req")
    assert cpu["outcome"] == "fail" and cpu["current"] > 1.5 * cpu["baseline"], cpu
    assert found["against"]["pairs"] >= 3
    assert len(found["base_repetitions"]) == len(found["repetitions"])
    for side, runs, other in (
        ("B", found["repetitions"], "checkout"),
        ("A", found["base_repetitions"], "cart"),
    ):
        for run in runs:  # Locust's request names are the endpoints, each side its own file
            assert f"locustfile.py: requests named GET page, POST {other}" in run["notes"]
            endpoints = run["endpoints"]
            assert set(endpoints) == {"page", other}, (side, endpoints)
            assert endpoints[other]["method"] == "POST" and run["errors"] == 0
            assert sum(e["requests"] for e in endpoints.values()) == run["requests"]
            assert endpoints["page"]["requests"] > endpoints[other]["requests"]  # 3:1 tasks


@pytest.mark.parametrize(
    ("locustfile", "call", "message"),
    [
        (
            SHOP + "\n\nfrom locust import LoadTestShape\n\n\nclass Ramp(LoadTestShape):\n"
            "    def tick(self):\n        return None\n",
            'webperf.locust(target, "locustfile.py")',
            "*locustfile */locustfile.py has a LoadTestShape (Ramp): webperf sets the users "
            "and the time itself*",
        ),
        (
            "import no_such_module\n",
            'webperf.locust(target, "locustfile.py")',
            "*locustfile */locustfile.py does not import: ModuleNotFoundError: "
            "No module named 'no_such_module' (locustfile.py:1)",
        ),
        (
            "X = 1\n",
            'webperf.locust(target, "locustfile.py")',
            "*locustfile */locustfile.py has no User class*",
        ),
        (
            SHOP,
            'webperf.locust(target, "missing.py")',
            "*locustfile='missing.py': no such file*",
        ),
        (
            SHOP,
            'webperf.locust(target, "locustfile.py", user_class="Nope")',
            "*user_class=Nope: not a User class of */locustfile.py (it has Shop)",
        ),
        (
            SHOP,
            'webperf.locust(target, "locustfile.py", concurrency=0)',
            "*concurrency=0): the number of Locust users, an int >= 1",
        ),
        (
            SHOP,
            'webperf.locust(target, "locustfile.py", user_class=["Shop", 3])',
            "*user_class=[[]'Shop', 3[]]: the name of a User class of the locustfile*",
        ),
    ],
    ids=["shape", "import-error", "no-user", "missing", "unknown-class", "users", "class-type"],
)
def test_a_locustfile_that_cannot_run_is_one_line_before_any_load(
    pytester: pytest.Pytester, locustfile: str, call: str, message: str
) -> None:
    pytester.makepyfile(
        server=SERVER,
        locustfile=locustfile,
        test_bad=f"""
import sys

def test_bad(webperf):
    target = webperf.process([sys.executable, "server.py"], name="shop")
    {call}
""",
    )
    (pytester.path / "work.txt").write_text("1")
    result = pytester.runpytest_subprocess(*RUN, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    assert "repetition 1/" not in result.stdout.str()  # no load was sent


def test_a_task_exception_is_the_failure_reason_with_where_it_was_raised(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        server=SERVER,
        locustfile="""
from locust import task
from pytest_webperf.swarm.child.lean import LeanHttpUser


class Browse(LeanHttpUser):
    @task
    def page(self):
        self.client.get("/page")  # a LeanHttpUser has self.get, not Locust's client
""",
        test_lean=TEST.replace('"locustfile.py: Shop"', '"locustfile.py: Browse"'),
    )
    (pytester.path / "work.txt").write_text("1")
    result = pytester.runpytest_subprocess(*RUN[:-2], "--webperf-repeat=1", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*[[]locustfile.py: Browse on shop[]] broken: * requests failed (100.0%; "
            "user_exception: *; e.g. AttributeError: 'Browse' object has no attribute "
            "'client' (locustfile.py:8))*"
        ]
    )


def test_a_lean_http_user_subclass_with_two_tasks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        server=SERVER,
        locustfile="""
from locust import task
from pytest_webperf.swarm.child.lean import LeanHttpUser


class Shop(LeanHttpUser):
    host = "http://192.0.2.1:8080"  # not loopback: the target gets the load instead

    @task(3)
    def browse(self):
        page = self.get("/page", name="page", keep_body=True)
        assert page.ok and page.status == 200 and len(page.body) == 64, page

    @task
    def buy(self):
        self.post("/cart", body=b'{"item": 1}', headers={"Content-Type": "application/json"})
""",
        test_shop=TEST,
    )
    (pytester.path / "work.txt").write_text("1")
    result = pytester.runpytest_subprocess(*RUN[:-2], "--webperf-repeat=1", RUN[-1], timeout=120)
    result.assert_outcomes(passed=1)
    (run,) = entry(pytester)["repetitions"]
    assert run["errors"] == 0 and run["requests"] > 50, run
    assert "locustfile.py: requests named GET page, POST /cart" in run["notes"]
    assert any(
        n.startswith("Shop.host 'http://192.0.2.1:8080' is not used: the load goes to")
        for n in run["notes"]
    ), run["notes"]
    assert set(run["endpoints"]) == {"page", "/cart"}
    assert sum(e["requests"] for e in run["endpoints"].values()) == run["requests"]


def test_a_paced_locust_user_is_charged_for_a_stall_from_the_intended_start(
    pytester: pytest.Pytester,
) -> None:
    # 4 users, a task every 20 ms: 200 requests/s; the server stalls once for a second
    # 1.5 s after its first request (the health check): ~200 tasks are due meanwhile,
    # 4 of them on the wire. Locust's own constant_pacing would restart its schedule
    # after the stall; webperf's keeps it and counts from each task's due time.
    pytester.makepyfile(
        server=STALLING_SERVER,
        locustfile="""
from locust import FastHttpUser, constant_pacing, task


class Paced(FastHttpUser):
    wait_time = constant_pacing(0.02)

    @task
    def work(self):
        self.client.get("/work")
""",
        test_paced="""
import sys


def test_paced(webperf):
    target = webperf.process(
        [sys.executable, "server.py"], name="stalling", env={"STALL_AFTER": "1.5"}
    )
    webperf.locust(target, "locustfile.py", concurrency=4, duration="3s", warmup="0.5s", repeat=1)
""",
    )
    result = pytester.runpytest_subprocess("-p", "no:locust", "--webperf-json=out.json")
    result.assert_outcomes(passed=1)
    (run,) = entry(pytester)["repetitions"]
    assert 400 <= run["requests"] <= 900, run["requests"]  # the pace, not flat out
    assert run["latency"]["p99_ms"] > 500, run["latency"]  # from the intended start
    assert run["service"]["p99_ms"] < 200, run["service"]  # send to response: hidden
    assert run["schedule_lag"]["p99_ms"] > 500, run["schedule_lag"]
    result.stdout.fnmatch_lines(
        ["*[[]locustfile.py: Paced[]] rep 1: paced: p99 * ms from the intended start*"]
    )


def test_a_custom_user_class_is_labelled_by_what_ran_never_by_an_unsent_path(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        server=SERVER,
        shop_users=SHOP,
        test_custom="""
import sys


def test_option(webperf):
    target = webperf.process([sys.executable, "server.py"], name="shop")
    result = webperf.http(target, "/work")  # a test written for webperf's own users
    assert result.name == "shop_users:Shop"


def test_both(webperf):
    target = webperf.process([sys.executable, "server.py"], name="shop")
    webperf.http(target, "/work", user="shop_users:Shop")
""",
    )
    (pytester.path / "work.txt").write_text("1")
    result = pytester.runpytest_subprocess(
        *RUN[:-2], "--webperf-repeat=1", RUN[-1], "--webperf-user=shop_users:Shop", timeout=120
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*path= is not sent by user='shop_users:Shop': your user class sends its own requests*"]
    )
    found = entry(pytester)
    assert found["name"] == "shop_users:Shop"
    assert found["workload"]["users"] == "shop_users:Shop" and found["workload"]["path"] == ""
    (run,) = found["repetitions"]
    assert set(run["endpoints"]) == {"page", "cart"}  # what was sent, never "/work"
