"""The run's settings, resolved once: command line > environment > ini > defaults,
with a test's ``@pytest.mark.webperf(...)`` on top.

Every value goes through the parser of its option, so a bad value is reported
the same way wherever it came from, naming where it came from.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_webperf.errors import OptionError
from pytest_webperf.gate.grammar import parse_checks as _parse_checks
from pytest_webperf.models.machine import check_machine_id
from pytest_webperf.settings.scaleout import parse_address, parse_bind_host, remote_of
from pytest_webperf.values import (
    parse_bool,
    parse_concurrency,
    parse_count,
    parse_count_mode,
    parse_cpu_list,
    parse_cpus,
    parse_cpuset,
    parse_duration,
    parse_exit_code,
    parse_fraction,
    parse_http_url,
    parse_memory,
    parse_placement,
    parse_positive_duration,
    parse_positive_int,
    parse_profile,
    parse_rate,
    parse_ref,
    parse_user_class,
)


def parse_checks(text: str) -> tuple[Any, ...]:
    return tuple(_parse_checks(text))


@dataclass(frozen=True)
class Setting:
    """One option: its name everywhere and its parser; its default is ``RunConfig``'s
    (one place for every default: ``default``)."""

    name: str  # RunConfig field; option --webperf-<name with dashes>, ini webperf_<name>
    parse: Callable[[Any], Any]
    help: str
    flag: bool = False  # a command-line switch without a value
    const: str | None = None  # the value of the option given without one (--webperf-count)
    multiple: bool = False  # repeatable on the command line; ini: one per line

    @property
    def default(self) -> Any:
        """The value when nothing sets it: the ``RunConfig`` field's default."""
        return getattr(RunConfig(), self.name)

    @property
    def option(self) -> str:
        return "--webperf-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "webperf_" + self.name

    @property
    def env(self) -> str:
        return "WEBPERF_" + self.name.upper()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "concurrency",
        parse_concurrency,
        "concurrent users/connections; a list parametrizes every webperf test (ids end -cN)",
    ),
    Setting(
        "duration",
        parse_positive_duration,
        "measured time per repetition, after the warm-up (e.g. 20s, 1m)",
    ),
    Setting("warmup", parse_duration, "load before measuring, not counted (e.g. 2s)"),
    Setting(
        "repeat",
        parse_positive_int,
        "repetitions per test (the seed studies used 5); never fewer than --webperf-min-repeat",
    ),
    Setting(
        "min_repeat",
        parse_positive_int,
        "at least this many repetitions per test, even where @pytest.mark.webperf(repeat=...) "
        "asks for fewer (for CI: more repetitions without editing tests)",
    ),
    Setting("baseline_dir", Path, "where baselines live"),
    Setting("save", parse_bool, "store this run as the new baseline (history kept)", flag=True),
    Setting(
        "save_failed",
        parse_bool,
        "with --webperf-save, also save measurements that failed their absolute checks "
        "(broken, or an error rate over the limit); without it they are not saved",
        flag=True,
    ),
    Setting(
        "compare_fail",
        parse_checks,
        "what counts as a regression, e.g. rps:5%,p95:10%,errors:0,p99_ms<500",
    ),
    Setting("json", Path, "write the JSON report to this path"),
    Setting(
        "otlp",
        parse_http_url,
        "export live metrics every second to this OTLP/HTTP receiver (e.g. "
        "http://127.0.0.1:4318; needs the [otlp] extra)",
    ),
    Setting("html", Path, "write the HTML report (charts) to this path"),
    Setting(
        "markdown",
        Path,
        "write a Markdown summary to this path ($GITHUB_STEP_SUMMARY is appended to)",
    ),
    Setting("servers", Path, "extra server catalogue directory (repeatable)", multiple=True),
    Setting(
        "target_url",
        str,
        "load an already running server at this URL instead of starting one",
    ),
    Setting(
        "allow_remote_target",
        parse_bool,
        "allow a --webperf-target-url that is not on loopback (only servers you own)",
        flag=True,
    ),
    Setting(
        "workers",
        parse_count,
        "load-generator processes on this machine (0 with --webperf-remote-workers: all "
        "load comes from other machines, this one runs the master and the server)",
    ),
    Setting(
        "remote_workers",
        parse_count,
        "also wait for this many generator workers from other machines (`webperf worker "
        "--master HOST:PORT` there) at every run; users are split over all workers",
    ),
    Setting(
        "master_bind",
        parse_address,
        "with --webperf-remote-workers: where the swarm's master listens (HOST:PORT)",
    ),
    Setting(
        "remote_wait",
        parse_positive_duration,
        "with --webperf-remote-workers: how long a run waits for them to join (e.g. 60s)",
    ),
    Setting(
        "secret_file",
        Path,
        "with --webperf-remote-workers: the file holding the secret that the workers must "
        "hold and the master proves (else $WEBPERF_SECRET); needed beyond loopback",
    ),
    Setting(
        "trusted_network",
        parse_bool,
        "with --webperf-remote-workers and no secret: listen beyond loopback all the same "
        "(any host reaching the port can join the run, and read it)",
        flag=True,
    ),
    Setting(
        "target_bind",
        parse_bind_host,
        "started targets listen on this address instead of loopback, where remote workers "
        "reach them (this machine's IPv4 address on their network, e.g. 10.0.0.5); without "
        "it nothing listens beyond loopback",
    ),
    Setting(
        "user",
        parse_user_class,
        "the swarm's HTTP user: auto (native where it is built, else lean), native (the "
        "C request loop), lean (pure Python on raw keep-alive sockets), fast (Locust's "
        "FastHttpUser), or module:UserClass (your own Locust User); webperf.mqtt: auto and "
        "native are the native MQTT loop (where built), the others paho-mqtt",
    ),
    Setting(
        "spawn_rate",
        parse_rate,
        "users started per second (0: all of them within about a second)",
    ),
    Setting(
        "timeout",
        parse_positive_duration,
        "a request unanswered for this long counts as a timeout",
    ),
    Setting(
        "machine_id",
        check_machine_id,
        "name of this machine for baselines (default: a fingerprint of the hardware)",
    ),
    Setting("target_cpus", parse_cpus, "CPU limit for target containers (e.g. 1.5)"),
    Setting("target_memory", parse_memory, "memory limit for target containers (e.g. 1g)"),
    Setting("target_cpuset", parse_cpuset, "pin target containers to these CPUs"),
    Setting("generator_cpus", parse_cpu_list, "pin load-generator processes to these CPUs"),
    Setting(
        "placement",
        parse_placement,
        "CPU placement: split (target and generator on disjoint cores), none, or auto "
        "(split on 4+ cores)",
    ),
    Setting(
        "against",
        parse_ref,
        "measure the change against git ref REF (e.g. origin/main), interleaved, in this run: "
        "every target is started from the working tree (B) and from REF (A); no stored "
        "baseline is read",
    ),
    Setting(
        "against_always",
        parse_bool,
        "with --webperf-against: measure targets that did not change too (an A/A run)",
        flag=True,
    ),
    Setting(
        "against_budget",
        parse_positive_duration,
        "with --webperf-against: time a test may take adding pairs beyond --webperf-repeat "
        "while a check is undecided (e.g. 60s)",
    ),
    Setting(
        "undecided_exit",
        parse_exit_code,
        "exit with this status when no test failed and some verdict was undecided "
        "(0, the default: it passes; 125 lets `git bisect run` skip the commit)",
    ),
    Setting(
        "history",
        Path,
        "append every verdict (A/B or against a baseline) as a line to this JSONL file "
        "(`webperf history PATH` draws it and looks for change points)",
    ),
    Setting(
        "profile",
        parse_profile,
        "CPU profiles, diffed per function per request: both sides of an A/B run, or a run "
        "and its stored baseline: auto (where perf or py-spy works here; against a stored "
        "baseline when it carries a profile, or the run saves one), on, off",
    ),
    Setting(
        "restart_every",
        parse_count,
        "start targets afresh every N repetitions (A/B: every N pairs), so that results "
        "average over process instances; 0: never",
    ),
    Setting(
        "require_power",
        parse_bool,
        "fail a check that was too noisy to detect a regression of its own threshold",
        flag=True,
    ),
    Setting(
        "requests",
        parse_count,
        "send exactly N requests per repetition, then stop, as ab -n does (no warm-up; "
        "the duration becomes the time limit); 0: run for the duration",
    ),
    Setting(
        "count",
        parse_count_mode,
        "count, not time (on, the value when none is given): webperf.http measurements "
        "run the target under Valgrind's callgrind for exactly N requests, and judge "
        "instructions, allocations and system calls per request; auto: time, and where a "
        "cpu_per_req check is left undecided and the load can be counted, count it and "
        "let the instructions per request decide it (docs/how-to/count.md)",
        const="on",
    ),
    Setting(
        "max_error_rate",
        parse_fraction,
        "failed requests allowed in any run, baseline or not (e.g. 0.01, or 2%); "
        "a run where most fail is broken",
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class RunConfig:
    concurrency: tuple[int, ...] = (100,)
    duration: float = 20.0
    warmup: float = 2.0
    repeat: int = 5
    min_repeat: int = 1
    baseline_dir: Path = Path("baselines")
    save: bool = False
    save_failed: bool = False
    compare_fail: tuple[Any, ...] | None = None
    json: Path | None = None
    otlp: str | None = None
    html: Path | None = None
    markdown: Path | None = None
    servers: tuple[Path, ...] = ()
    target_url: str | None = None
    allow_remote_target: bool = False
    workers: int = 1
    remote_workers: int = 0
    master_bind: str = "127.0.0.1:5557"
    remote_wait: float = 60.0
    secret_file: Path | None = None
    trusted_network: bool = False
    target_bind: str | None = None
    user: str = "auto"
    spawn_rate: float = 0.0
    timeout: float = 10.0
    machine_id: str | None = None
    target_cpus: float | None = None
    target_memory: str | None = None
    target_cpuset: str | None = None
    generator_cpus: tuple[int, ...] = ()
    placement: str = "auto"
    against: str | None = None
    against_always: bool = False
    against_budget: float = 60.0
    undecided_exit: int = 0
    history: Path | None = None
    profile: str = "auto"
    restart_every: int = 1
    require_power: bool = False
    max_error_rate: float = 0.01
    requests: int = 0
    count: bool | str = False  # True, False or "auto" (values.parse_count_mode)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)  # name -> origin

    def with_overrides(self, overrides: Mapping[str, Any], origin: str) -> RunConfig:
        """A copy with marker-style overrides (raw values, parsed here)."""
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            setting = BY_NAME.get(key)
            if setting is None:
                known = ", ".join(sorted(BY_NAME))
                raise OptionError(f"{origin}: unknown setting {key!r} (known: {known})")
            changes[key] = parse_value(setting, raw, f"{origin} {key}=")
        sources = {**self.sources, **{k: origin for k in changes}}
        changed = dataclasses.replace(self, **changes, sources=sources)
        return changed.at_least_min_repeat().with_a_generator()

    def with_a_generator(self) -> RunConfig:
        """Itself, if some process generates load: ``workers=0`` needs remote workers."""
        if self.workers == 0 and not self.remote_workers:
            source = self.sources.get("workers", "")
            said = f"{source}=0" if source.startswith("-") or source.isupper() else "workers=0"
            where = "" if said.startswith(source) else f" ({source})"
            raise OptionError(
                f"{said}{where} leaves no load generator: give --webperf-remote-workers too "
                "(all load from other machines), or at least 1"
            )
        return self

    def at_least_min_repeat(self) -> RunConfig:
        """``repeat`` raised to ``min_repeat``, the last word on repetitions (a CI job
        raises them for every test, markers included, without editing tests)."""
        if self.repeat >= self.min_repeat:
            return self
        raised_by = self.sources.get("min_repeat", BY_NAME["min_repeat"].option)
        over = self.sources.get("repeat", "the default")
        sources = {**self.sources, "repeat": f"{raised_by}, over {over}'s {self.repeat}"}
        return dataclasses.replace(self, repeat=self.min_repeat, sources=sources)


def parse_value(setting: Setting, raw: Any, origin: str) -> Any:
    try:
        if setting.multiple:
            items = raw if isinstance(raw, list | tuple) else str(raw).split()
            return tuple(setting.parse(i) for i in items)
        return setting.parse(raw)
    except (ValueError, TypeError) as exc:
        raise OptionError(f"{origin}{raw!r}: {exc}") from None
    except OptionError as exc:
        raise OptionError(f"{origin}{raw!r}: {exc}") from None


def resolve(cli: Mapping[str, Any], env: Mapping[str, str], ini: Mapping[str, Any]) -> RunConfig:
    """One RunConfig from already-parsed CLI values and raw env/ini strings."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        if cli.get(setting.name) not in (None, (), []):
            values[setting.name] = cli[setting.name]
            sources[setting.name] = setting.option
        elif env.get(setting.env):
            values[setting.name] = parse_value(setting, env[setting.env], f"{setting.env}=")
            sources[setting.name] = setting.env
        elif ini.get(setting.name) not in (None, "", []):
            values[setting.name] = parse_value(
                setting, ini[setting.name], f"ini option {setting.ini} = "
            )
            sources[setting.name] = setting.ini
    config = RunConfig(**values, sources=sources).at_least_min_repeat().with_a_generator()
    remote_of(config, env)  # the secret readable, the master's address allowed without one
    if config.against and config.target_url:
        raise OptionError(
            f"{sources['against']} and {sources['target_url']} cannot go together: a server "
            "that is already running cannot be started again from another git ref"
        )
    return config


EXPLAINED = ("concurrency", "duration", "warmup", "repeat")
_MARKER_PREFIX = re.compile(r"\S+: (?=@pytest\.mark\.)")  # "<nodeid>: @pytest.mark.webperf"


def _shown(name: str, value: Any) -> str:
    if name in ("duration", "warmup"):
        return f"{value:g}s"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def explain(test: RunConfig, run: RunConfig, concurrency: int | None = None) -> str:
    """The settings a test ran with and, where not the command line, where each came
    from: ``concurrency=5 duration=1s warmup=2s (default) repeat=3 (from
    @pytest.mark.webperf, beats --webperf-repeat=5)``. ``run`` is the run's config
    (before markers); ``concurrency`` the test's own, when it was parametrized."""
    parts = []
    for name in EXPLAINED:
        value = concurrency if name == "concurrency" and concurrency else getattr(test, name)
        origin = test.sources.get(name)
        text = f"{name}={_shown(name, value)}"
        if origin is None:
            text += " (default)"
        elif origin != BY_NAME[name].option:
            note = f"from {_MARKER_PREFIX.sub('', origin)}"
            beaten = run.sources.get(name)
            if beaten is not None and beaten != origin:
                note += (
                    f", beats {_MARKER_PREFIX.sub('', beaten)}={_shown(name, getattr(run, name))}"
                )
            text += f" ({note})"
        parts.append(text)
    return " ".join(parts)
