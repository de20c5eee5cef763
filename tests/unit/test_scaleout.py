"""Remote generator workers without running any: the options' values, the spec the
master hands over, MQTT client-id ranges, the remote generator-bound rule, the
target bind's refusals, the worker command's usage errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf import cli
from pytest_webperf.errors import OptionError
from pytest_webperf.measurement.mqtt import wiring
from pytest_webperf.models.samples import ResourceSample
from pytest_webperf.models.workload import Workload
from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.sampling.resources import remote_bound
from pytest_webperf.settings.config import resolve
from pytest_webperf.settings.scaleout import remote_of
from pytest_webperf.swarm.runner import GeneratorProcess
from pytest_webperf.swarm.spec import Remote, SwarmSpec, split_address
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.targets.container import ContainerTarget


def test_no_local_worker_needs_remote_ones() -> None:
    """--webperf-workers=0: all load from other machines; alone it leaves no generator."""
    config = resolve({"workers": 0, "remote_workers": 2}, {}, {})
    assert (config.workers, config.remote_workers) == (0, 2)
    with pytest.raises(OptionError, match="--webperf-workers=0 leaves no load generator"):
        resolve({"workers": 0}, {}, {})
    with pytest.raises(OptionError, match="WEBPERF_WORKERS=0 leaves no load generator"):
        resolve({}, {"WEBPERF_WORKERS": "0"}, {})
    with pytest.raises(OptionError, match=r"^workers=0 \(t.py::t: @pytest\.mark\.webperf\) "):
        resolve({}, {}, {}).with_overrides({"workers": 0}, "t.py::t: @pytest.mark.webperf")
    remote = Remote(2, "127.0.0.1:5557")
    swarm = SwarmSpec(host="http://127.0.0.1:1", users=4, duration_s=1, workers=0, remote=remote)
    assert (swarm.distributed, swarm.local_workers, swarm.processes) == (True, 0, 2)
    with pytest.raises(ValueError, match="at least one generator process"):
        SwarmSpec(host="http://127.0.0.1:1", users=4, duration_s=1, workers=0)


def test_remote_options_resolve_into_the_swarms_remote() -> None:
    secret = {"WEBPERF_SECRET": "s" * 32}  # beyond loopback, the master needs one
    config = resolve(
        {"remote_workers": 2, "master_bind": "10.0.0.5:6000", "remote_wait": 5.0}, secret, {}
    )
    assert remote_of(config, secret) == Remote(2, "10.0.0.5:6000", 5.0)
    assert remote_of(resolve({}, {}, {}), {}) is None  # none by default
    assert resolve({}, {}, {}).master_bind == "127.0.0.1:5557"
    env = resolve({}, {"WEBPERF_REMOTE_WORKERS": "3", "WEBPERF_TARGET_BIND": "127.0.0.2"}, {})
    assert (env.remote_workers, env.target_bind) == (3, "127.0.0.2")


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("WEBPERF_REMOTE_WORKERS", "-1", "must be at least 0"),
        ("WEBPERF_REMOTE_WORKERS", "two", "not a whole number"),
        ("WEBPERF_MASTER_BIND", "10.0.0.5", "is not HOST:PORT"),
        ("WEBPERF_MASTER_BIND", "host:99999", "is not HOST:PORT"),
        ("WEBPERF_REMOTE_WAIT", "0s", "longer than zero"),
        ("WEBPERF_TARGET_BIND", "example.com", "is not an IP address"),
        ("WEBPERF_TARGET_BIND", "0.0.0.0", "this machine's address on the workers' network"),
        ("WEBPERF_TARGET_BIND", "::1", "only IPv4 addresses are supported"),
    ],
)
def test_bad_remote_options_are_usage_errors(name: str, value: str, says: str) -> None:
    with pytest.raises(OptionError, match=f"^{name}='{value}': .*{says}"):
        resolve({}, {name: value}, {})


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:5557", ("127.0.0.1", 5557)),
        (" master.example:1 ", ("master.example", 1)),
        ("[::1]:5557", ("::1", 5557)),
    ],
)
def test_split_address(text: str, address: tuple[str, int]) -> None:
    assert split_address(text) == address


@pytest.mark.parametrize("text", ["", ":5557", "host:", "host:0", "host:x", "host"])
def test_split_address_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        split_address(text)


@given(
    workers=st.integers(1, 8),
    remote=st.integers(1, 8),
    wait=st.floats(0.5, 600),
    port=st.integers(1, 65535),
)
def test_the_spec_with_its_remote_part_survives_the_hand_over(
    workers: int, remote: int, wait: float, port: int
) -> None:
    spec = SwarmSpec(
        host="http://10.0.0.5:8080",
        users=workers + remote,
        duration_s=3,
        workers=workers,
        user_class="lean",
        workload=Workload(path="/x"),
        remote=Remote(remote, f"10.0.0.5:{port}", wait),
    )
    handed = SwarmSpec.from_dict(json.loads(json.dumps(spec.to_dict())))  # master -> worker
    assert handed == spec
    assert handed.distributed and handed.processes == workers + remote
    assert handed.local_workers == workers
    assert handed.deadline_s >= wait  # the wait for the workers is inside the child's life


def test_one_local_process_without_remote_workers() -> None:
    spec = SwarmSpec(host="http://127.0.0.1:1", users=1, duration_s=1)
    assert (spec.distributed, spec.processes, spec.local_workers) == (False, 1, 0)
    assert SwarmSpec.from_dict(spec.to_dict()).remote is None


def test_too_few_users_for_every_process() -> None:
    with pytest.raises(ValueError, match="3 users cannot keep 4 generator workers busy"):
        SwarmSpec(host="h", users=3, duration_s=1, workers=2, remote=Remote(2))


@given(users=st.integers(1, 5000), processes=st.integers(1, 16))
def test_mqtt_client_id_ranges_are_disjoint_and_cover_every_user(
    users: int, processes: int
) -> None:
    spec = SwarmSpec(host="mqtt://127.0.0.1:1883", users=users, duration_s=1)
    ranges = [spec.client_ids(index) for index in range(processes)]
    seen: set[int] = set()
    for ids in ranges:
        assert len(ids) == users  # room for all users, however Locust splits them
        assert seen.isdisjoint(ids)
        seen.update(ids)
    assert ranges[0] == range(1, users + 1)  # one process: the ids it always had


def test_an_mqtt_spec_with_workers_is_allowed() -> None:
    spec = SwarmSpec(
        host="mqtt://127.0.0.1:1883",
        users=40,
        duration_s=1,
        workers=2,
        user_class="mqtt",
        mqtt=MqttLoad(port=1883),
    )
    assert spec.processes == 2


@dataclass
class _Outcome:
    generators: list[GeneratorProcess]
    duration_s: float


def _server(percent: float) -> list[ResourceSample]:
    return [ResourceSample(float(t), "s", percent, 10.0, 1, 1) for t in range(3)]


def test_a_saturated_remote_worker_makes_the_run_generator_bound() -> None:
    busy = GeneratorProcess(1, "remote1@other", cpu_s=9.0)
    idle = GeneratorProcess(2, "worker0", cpu_s=9.5)  # local ones are the sampler's business
    assert remote_bound(_Outcome([busy], 10.0), _server(50), cores=2)
    assert not remote_bound(_Outcome([busy], 10.0), _server(190), cores=2)  # server saturated
    assert not remote_bound(_Outcome([GeneratorProcess(1, "remote1@x", cpu_s=5)], 10.0), [])
    assert not remote_bound(_Outcome([idle], 10.0), _server(50), cores=2)
    assert not remote_bound(_Outcome([busy], 0.0), [])


def test_a_target_bind_needs_a_server_that_takes_its_address(tmp_path: Path) -> None:
    server = tmp_path / "srv"
    server.mkdir()
    (server / "Dockerfile").write_text("FROM scratch\n")
    (server / "server.toml").write_text('name = "srv"\nkind = "http"\n')
    with pytest.raises(OptionError, match="srv listens on loopback only"):
        ContainerTarget(Catalog([tmp_path]), "srv", bind="10.0.0.5")
    (server / "server.toml").write_text('name = "srv"\nkind = "http"\nbind_env = "BIND"\n')
    target = ContainerTarget(Catalog([tmp_path]), "srv", bind="127.0.0.2")
    assert target.url == "http://127.0.0.2:0"  # the address every worker loads


def test_a_target_bind_exposes_an_mqtt_composite_s_broker_and_nothing_else(
    tmp_path: Path,
) -> None:
    """The MQTT load goes to the broker, so it listens on the bind address too; the store
    stays on loopback. A broker that cannot take the address is refused by name."""
    for name, toml in {
        "app": 'kind = "http"\nbind_env = "BIND"\n[mqtt]\nbroker = "broker"\nstore = "db"\n'
        '[[depends]]\nserver = "db"\nport_env = "DB_PORT"\n'
        '[[depends]]\nserver = "broker"\nport_env = "MQTT_PORT"\n',
        "broker": 'kind = "mqtt"\nhealth = "tcp"\n',
        "db": 'kind = "tcp"\nhealth = "tcp"\n',
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text("FROM scratch\n")
        (tmp_path / name / "server.toml").write_text(f'name = "{name}"\n{toml}')
    with pytest.raises(OptionError, match="broker listens on loopback only"):
        ContainerTarget(Catalog([tmp_path]), "app", bind="127.0.0.2")
    broker = tmp_path / "broker" / "server.toml"
    broker.write_text(broker.read_text() + 'bind_env = "BIND"\n')
    target = ContainerTarget(Catalog([tmp_path]), "app", bind="127.0.0.2")
    assert target.exposed == {"app", "broker"}
    assert Catalog([tmp_path]).get("broker").mqtt_broker == "broker"
    assert Catalog([tmp_path]).get("db").mqtt_broker is None


def test_mqtt_publishers_and_the_observer_go_to_the_broker_s_address() -> None:
    """With a bind, the broker's address (not 127.0.0.1) is where every worker publishes:
    a bare broker's own, or a composite's broker part's."""
    catalog = Catalog(default_directories())
    bare = SimpleNamespace(spec=catalog.get("mosquitto"), containers=[], port=7, host="127.0.0.2")
    wired = wiring(bare)  # type: ignore[arg-type]
    assert (wired.broker_host, wired.broker_port) == ("127.0.0.2", 7)
    broker = SimpleNamespace(spec=catalog.get("mosquitto"), port=8, host="127.0.0.3")
    composite = SimpleNamespace(spec=catalog.get("go-mqtt"), containers=[broker], port=9)
    wired = wiring(composite)  # type: ignore[arg-type]
    assert (wired.broker_host, wired.broker_port, wired.store) == ("127.0.0.3", 8, None)


def test_every_built_in_server_that_takes_load_can_listen_where_workers_reach_it() -> None:
    """The catalogue's servers take --webperf-target-bind (their start scripts read $BIND;
    test_conformance starts them bound to 127.0.0.2); stores behind them need not."""
    catalog = Catalog(default_directories())
    unbound = [spec.name for spec in catalog if spec.bind_env is None]
    assert unbound == ["mariadb"]


@pytest.mark.parametrize(
    ("master", "says"),
    [("nonsense", "'nonsense' is not HOST:PORT"), ("h:0", "'h:0' is not HOST:PORT")],
)
def test_webperf_worker_refuses_a_bad_address(
    capsys: pytest.CaptureFixture[str], master: str, says: str
) -> None:
    assert cli.main(["worker", "--master", master]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"webperf worker: error: {says} (example: 127.0.0.1:5557)"]
