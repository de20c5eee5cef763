"""Unit tests of the machine fingerprint."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError, WebperfError
from pytest_webperf.models import machine
from pytest_webperf.models.machine import MachineInfo

INFO = MachineInfo(
    cpu_model="Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz",
    cores=2,
    memory_gib=24,
    kernel="6.1.0-18-amd64",
    engine_version="24.0.5",
    cpu_quota=1.0,
    network_mode="host",
)


def test_machine_id_is_readable_and_stable() -> None:
    ident = machine.machine_id(INFO)
    assert re.fullmatch(r"intel-xeon-e5-2686-v4-2c-[0-9a-f]{8}", ident)
    assert machine.machine_id(INFO) == ident
    assert machine.machine_id(MachineInfo.from_dict(INFO.to_dict())) == ident


@pytest.mark.parametrize(
    "change",
    [
        {"cpu_model": "AMD EPYC 7763 64-Core Processor"},
        {"cores": 4},
        {"memory_gib": 16},
        {"kernel": "6.1.0-20-amd64"},
        {"engine_version": "25.0.0"},
        {"cpu_quota": 2.0},
        {"cpu_quota": None},
        {"network_mode": "bridge"},
        {"generator": "native"},
    ],
)
def test_everything_that_changes_performance_changes_the_id(change: dict[str, object]) -> None:
    other = dataclasses.replace(INFO, **change)  # type: ignore[arg-type]
    assert machine.machine_id(other) != machine.machine_id(INFO)


def test_the_lean_generator_keeps_the_ids_made_before_the_native_loop() -> None:
    assert "generator" not in INFO.to_dict()  # so not in the hash: older ids unchanged
    native = dataclasses.replace(INFO, generator="native")
    assert native.to_dict()["generator"] == "native"
    assert MachineInfo.from_dict(native.to_dict()) == native


def test_override_replaces_the_id_but_must_name_a_safe_directory() -> None:
    assert machine.machine_id(INFO, "ci-runner-large") == "ci-runner-large"
    assert machine.machine_id(INFO, "") == machine.machine_id(INFO)  # empty: not given
    for bad in ("../elsewhere", "a/b", ".hidden", "x" * 101, "with space"):
        with pytest.raises(OptionError, match="--webperf-machine-id"):
            machine.machine_id(INFO, bad)


@pytest.mark.parametrize(
    ("text", "model"),
    [
        (
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\n"
            "model name\t: Intel(R) Xeon(R) Processor\n",
            "Intel(R) Xeon(R) Processor",
        ),
        (
            "processor\t: 0\nBogoMIPS\t: 108.00\nCPU part\t: 0xd08\n\nHardware\t: BCM2835\n",
            "BCM2835",
        ),
    ],
)
def test_cpu_model_from_proc_cpuinfo(text: str, model: str) -> None:
    assert machine.cpu_model(text) == model


def test_collect_reads_this_machine(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Test CPU 9000\n")
    info = machine.collect(engine_version="24.0.5", cpu_quota=1.5, cpuinfo_path=cpuinfo)
    assert info.cpu_model == "Test CPU 9000"
    assert info.cores >= 1 and info.memory_gib >= 1 and info.kernel
    assert info.engine_version == "24.0.5" and info.cpu_quota == 1.5
    assert machine.machine_id(info).startswith(f"test-9000-{info.cores}c-")
    missing = machine.collect(cpuinfo_path=tmp_path / "absent")
    assert missing.cpu_model  # falls back to the platform module


@given(st.text(max_size=80))
def test_slug_is_always_a_safe_directory_name(text: str) -> None:
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", machine.slug(text))
    ident = machine.machine_id(dataclasses.replace(INFO, cpu_model=text))
    assert machine.check_machine_id(ident) == ident


def test_added_keys_are_in_the_fingerprint_and_none_keep_the_old_id() -> None:
    plain = INFO.to_dict()
    assert "extra" not in plain  # the hash of a machine without hooks is unchanged
    grown = MachineInfo.from_hook({**plain, "runner_pool": "blue"}, "hook")
    assert grown.extra == {"runner_pool": "blue"}
    assert grown.to_dict() == {**plain, "runner_pool": "blue"}
    assert MachineInfo.from_dict(grown.to_dict()) == grown
    assert machine.machine_id(grown) != machine.machine_id(INFO)
    assert machine.machine_id(MachineInfo.from_hook(plain, "hook")) == machine.machine_id(INFO)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cores": None}, "hook left a value in the machine info that does not fit"),
        ({"gpu": object()}, "hook left a value in the machine info that does not fit"),
    ],
)
def test_a_hook_must_leave_json_with_the_built_in_types(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(WebperfError, match=message):
        MachineInfo.from_hook({**INFO.to_dict(), **change}, "hook")
