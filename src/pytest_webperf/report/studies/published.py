"""The five studies' published figures (``../shared/EXPERIMENTS.md``): per study, the
suite's test it compares, and each group of figures (a workload at a number of users)
with the servers' ranking as the study found it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Figures:
    """One of a study's published groups: a workload at a number of users."""

    path: str | None  # None: the study did not say, or had one workload
    users: int
    values: Mapping[str, float | None]  # catalogue server -> figure (None: ranked only)
    ranking: tuple[str, ...]  # best first, as the study found it
    gap: float | None = None  # the study's ratio between neighbours, where it gave no figures

    def ratio(self, first: str, second: str) -> float | None:
        """The study's ratio of ``first`` to ``second`` (its figures, else its ``gap``)."""
        a, b = self.values.get(first), self.values.get(second)
        return a / b if a and b else self.gap


@dataclass(frozen=True)
class Study:
    seed: str
    title: str
    test: str  # "test_seed004_c10k.py::test_c10k": the suite's test it compares
    metric: str  # "rps" or "requests" (mean per repetition)
    label: str
    groups: tuple[Figures, ...]
    capacity_test: str | None = None  # the suite's webperf.capacity test, ranked by rate
    # from this many users the study's servers stored well under the offered rate (seed
    # 002's MQTT "collapse"): a line there says whether the servers here kept it
    collapse_from: int | None = None
    interval_s: float | None = None  # each user's interval, where the study paced its users


def _f(
    path: str | None, users: int, ranking: str, gap: float | None = None, **values: float | None
) -> Figures:
    return Figures(
        path,
        users,
        {k.replace("_", "-"): v for k, v in values.items()},
        tuple(ranking.split(" > ")),
        gap,
    )


STUDIES: tuple[Study, ...] = (
    Study(
        "000",
        "Apache+PHP vs Node.js (wrk, 20 s)",
        "test_seed000_apache_vs_node.py::test_apache_vs_node",
        "requests",
        "requests per repetition",
        (
            _f("/hello", 100, "node > apache-php", apache_php=9_000, node=11_800),
            _f("/hello", 500, "node > apache-php", apache_php=12_500, node=59_000),
            _f("/hello", 1000, "node > apache-php", apache_php=24_000, node=118_000),
        ),
        "test_seed000_apache_vs_node.py::test_apache_vs_node_capacity",
    ),
    Study(
        "001",
        "nginx proxy_cache vs Varnish in front of Apache (ab -c 200)",
        "test_seed001_proxy_cache.py::test_proxy_cache",
        "rps",
        "req/s",
        # "28-40 % better than Varnish": nginx-cache/varnish 1.28x at least
        (_f(None, 200, "nginx-cache > varnish", 1.28, nginx_cache=1_207, varnish=None),),
    ),
    Study(
        "002",
        "Tomcat vs Node vs Go, HTTP telemetry into MariaDB (500 ms per user)",
        "test_mqtt_qos2.py::test_http_telemetry",
        "rps",
        "req/s",
        (
            _f(
                "/telemetry",
                1000,
                "go-mqtt > tomcat-mqtt > node-mqtt",
                go_mqtt=1_639,
                tomcat_mqtt=1_221,
                node_mqtt=953,
            ),
        ),
        "test_mqtt_qos2.py::test_http_telemetry_capacity",
    ),
    Study(
        "002",
        "Tomcat vs Node vs Go, MQTT QoS 2 telemetry into MariaDB (500 ms per user)",
        "test_mqtt_qos2.py::test_mqtt_qos2",
        "tps",
        "stored msg/s",
        # ~970 tps for all three at 600 users, then the broker stalled: Go 680/596, Node
        # 383/211, Tomcat 347/308 at 800/1,000 (of 1,600/2,000 offered)
        (
            _f(
                None,
                600,
                "go-mqtt > node-mqtt > tomcat-mqtt",
                go_mqtt=970,
                node_mqtt=970,
                tomcat_mqtt=970,
            ),
            _f(
                None,
                800,
                "go-mqtt > node-mqtt > tomcat-mqtt",
                go_mqtt=680,
                node_mqtt=383,
                tomcat_mqtt=347,
            ),
            _f(
                None,
                1000,
                "go-mqtt > tomcat-mqtt > node-mqtt",
                go_mqtt=596,
                tomcat_mqtt=308,
                node_mqtt=211,
            ),
        ),
        collapse_from=800,
        interval_s=0.5,
    ),
    Study(
        "003",
        "async vs process pool, alone and behind a load balancer (wrk -c 1000, 10 s)",
        "test_seed003_async_vs_pool.py::test_async_vs_pool",
        "rps",
        "req/s",
        (
            _f(
                "/hello",
                1000,
                "python-async > lb-async > python-pool > lb-pool",
                python_async=6_900,
                lb_async=5_000,
                python_pool=1_800,
                lb_pool=225,
            ),
        ),
        "test_seed003_async_vs_pool.py::test_async_vs_pool_capacity",
    ),
    Study(
        "004",
        "nginx vs Node vs a libuv Python server at C10K (ab -n 80000 -c 10000)",
        "test_seed004_c10k.py::test_c10k",
        "rps",
        "req/s",
        (
            _f(
                "/500b",
                10_000,
                "nginx > python-uv > node",
                nginx=15_674,
                python_uv=9_420,
                node=3_775,
            ),
            _f(
                "/20kb",
                10_000,
                "nginx > python-uv > node",
                nginx=15_152,
                python_uv=6_786,
                node=3_415,
            ),
        ),
        "test_seed004_c10k.py::test_c10k_capacity",
    ),
)
