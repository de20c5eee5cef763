"""pytest glue: options, markers, the ``webperf`` fixture, verdicts as test outcomes.

Everything else in the package is plain Python; this module only translates
between pytest and it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_webperf import hookspec
from pytest_webperf.commands.ci import junit_properties
from pytest_webperf.errors import OptionError, WebperfError
from pytest_webperf.fixture.handle import Webperf
from pytest_webperf.gate.advice import advice_of, group_summary_advice
from pytest_webperf.profiling.capture import header_note
from pytest_webperf.report.otlp import LiveMetrics
from pytest_webperf.run import outcome
from pytest_webperf.run.finish import undecided_exit
from pytest_webperf.run.screen import progress_for, with_live
from pytest_webperf.run.session import Extensions, WebperfSession
from pytest_webperf.run.xdist import join_xdist
from pytest_webperf.settings.config import SETTINGS, RunConfig, Setting, explain, resolve
from pytest_webperf.settings.scaleout import farewell, remote_of
from pytest_webperf.swarm.hotloop import fallback_note, resolve_user
from pytest_webperf.targets import remove_session_containers
from pytest_webperf.targets.against import Unchanged

session_key = pytest.StashKey[WebperfSession]()
settings_key = pytest.StashKey[dict[str, str]]()  # nodeid -> the settings it ran with
live_key = pytest.StashKey[LiveMetrics]()  # --webperf-otlp's exporter
test_config_key = pytest.StashKey[RunConfig]()  # an item's settings, resolved once
undecided_key = pytest.StashKey[list[str]]()  # a test's checks left unchecked
MARKER = "webperf"


def _argtype(setting: Setting) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return setting.parse(text)
        except (ValueError, OptionError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = setting.name
    return parse


def argparse_help(text: str) -> str:
    """``text`` as argparse shows it: argparse %-formats option help (for
    ``%(default)s``), so a bare ``%`` (``rps:5%``) would crash ``pytest --help``."""
    return text.replace("%", "%%")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("webperf", "performance regression gates (pytest-webperf)")
    for setting in SETTINGS:
        help_text = argparse_help(setting.help)
        if setting.flag:
            group.addoption(setting.option, action="store_true", default=None, help=help_text)
        elif setting.const is not None:  # --webperf-count, --webperf-count=auto
            group.addoption(
                setting.option,
                nargs="?",
                const=setting.const,
                type=_argtype(setting),
                default=None,
                help=help_text,
                metavar=setting.name.upper(),
            )
        else:
            group.addoption(
                setting.option,
                type=_argtype(setting),
                default=None,
                help=help_text,
                action="append" if setting.multiple else "store",
                metavar=setting.name.upper(),
            )
        if setting.multiple:
            parser.addini(setting.ini, setting.help, type="linelist")
        else:
            parser.addini(setting.ini, setting.help, type="string")


def _resolve(config: pytest.Config) -> RunConfig:
    cli = {s.name: config.getoption(s.option) for s in SETTINGS}
    ini = {s.name: config.getini(s.ini) for s in SETTINGS}
    try:
        return resolve(cli, os.environ, ini)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "webperf(**settings): per-test webperf settings on top of the run's, e.g. "
        "@pytest.mark.webperf(concurrency=[10, 50], duration='5s', compare_fail='rps:3%')",
    )
    run_config = _resolve(config)
    try:
        resolve_user(run_config.user)  # --webperf-user=native where it is not built: now
        session = WebperfSession(run_config, Path(str(config.rootpath)), _extensions(config))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[session_key] = session
    if run_config.otlp:  # live metrics: the exporter lives as long as the run
        try:
            config.stash[live_key] = LiveMetrics.start(run_config.otlp)
        except OptionError as exc:
            raise pytest.UsageError(str(exc)) from None
    join_xdist(config, session)
    _sigterm_as_ctrl_c(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Said once per run: the native loop is not built, the lean user stands in; an A/B
    run has no CPU profiles because no profiler works here."""
    session = config.stash.get(session_key, None)
    if session is None:
        return []
    notes = [
        fallback_note(session.config.user),
        header_note(session.config.profile, session.config.against),
    ]
    return [note for note in notes if note]


sigterm_key = pytest.StashKey[Any]()  # the SIGTERM handler we replaced


def _sigterm_as_ctrl_c(config: pytest.Config) -> None:
    """A cancelled CI job sends SIGTERM: make it a KeyboardInterrupt, so that targets,
    swarms and temporary files go as they do on Ctrl-C. Only in the main thread, and
    only where nobody else handles SIGTERM; a second SIGTERM kills as usual."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt(f"webperf: {signal.Signals(signum).name} received")

    config.stash[sigterm_key] = signal.signal(signal.SIGTERM, interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    live = config.stash.get(live_key, None)
    if live is not None:
        live.close()
    previous = config.stash.get(sigterm_key, None)
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def _session(config: pytest.Config) -> WebperfSession:
    return config.stash[session_key]


def _item_config(item: pytest.Item, base: RunConfig) -> RunConfig:
    """A test's settings, resolved once and kept in its stash (the settings note and the
    fixture both read them)."""
    found = item.stash.get(test_config_key, None)
    if found is None:
        found = item.stash[test_config_key] = _test_config(item, base)
    return found


def _test_config(node: pytest.Item | pytest.Function, base: RunConfig) -> RunConfig:
    """The run's config with the test's markers on top (closest marker wins)."""
    result = base
    for mark in reversed(list(node.iter_markers(MARKER))):
        if mark.args:
            raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.webperf takes keywords only")
        try:
            result = result.with_overrides(mark.kwargs, f"{node.nodeid}: @pytest.mark.webperf")
        except OptionError as exc:
            raise pytest.UsageError(str(exc)) from None
    return result


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test using ``webperf`` runs once per concurrency; ids end ``[c<N>]``."""
    if "webperf" not in metafunc.fixturenames:
        return
    try:
        config = _test_config(metafunc.definition, _session(metafunc.config).config)
    except pytest.UsageError as exc:  # a bad marker: one line, as a bad option is
        raise pytest.Collector.CollectError(str(exc)) from None
    metafunc.parametrize(
        "webperf_concurrency", config.concurrency, ids=[f"c{c}" for c in config.concurrency]
    )


@pytest.fixture
def webperf_concurrency() -> int:
    """The concurrency of this test (parametrized from --webperf-concurrency)."""
    return 1  # replaced by parametrization for every test that uses ``webperf``


@pytest.fixture
def webperf(
    request: pytest.FixtureRequest, webperf_concurrency: int, _webperf_turn: None
) -> Generator[Webperf]:
    """Start servers and load them: ``webperf.http(webperf.server("nginx"), path="/hello")``."""
    session = _session(request.config)
    handle = Webperf(
        nodeid=request.node.nodeid,
        concurrency=webperf_concurrency,
        config=_item_config(request.node, session.config),
        catalog=lambda: session.catalog,
        verdicts=session.verdict,
        stored=session.stored,
        against=session.against if session.config.against else None,
        progress=with_live(progress_for(request.config), request.config.stash.get(live_key, None)),
    )
    try:
        yield handle
    finally:
        session.record(handle.measurements)
        handle.close()
        session.finished.extend(_target_url_notice(session.config, handle))


def _target_url_notice(config: RunConfig, handle: Webperf) -> list[str]:
    """--webperf-target-url replaces catalogue servers only: say so where a test
    started its own command instead (a warning would fail suites run with -W error)."""
    started = any(m.target.get("kind") == "process" for m in handle.measurements)
    if not config.target_url or not started:
        return []
    return [
        f"webperf: {handle.nodeid}: --webperf-target-url does not apply to "
        "webperf.process(...): it measured the command it started"
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A regression fails the test that measured it, one line per failed check. A
    user-caused problem (a bad argument, a server that did not start) fails it with its
    message, where in the test it came from, and no traceback: raised outside the
    ``except``, so that pytest does not show it "during handling of" the error."""
    skipped = failure = None
    try:
        result = yield
    except Unchanged as exc:
        skipped = f"webperf: unchanged: {exc}"
    except WebperfError as exc:
        failure = f"{_where(item, exc)}{type(exc).__name__}: {exc}"
    if skipped is not None:
        pytest.skip(skipped)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    session = item.config.stash.get(session_key, None)
    webperf_handle = getattr(item, "funcargs", {}).get("webperf")
    if session is not None and isinstance(webperf_handle, Webperf):
        for m in webperf_handle.measurements:  # for --junitxml
            item.user_properties.extend(junit_properties(m))
        # advice (generator-bound, no baseline) is said once in the summary, not here
        failed = outcome.failure_lines(webperf_handle.measurements)
        if failed:
            pytest.fail("webperf regression:\n" + "\n".join(failed), pytrace=False)
        unchecked = outcome.undecided_lines(webperf_handle.measurements)
        if unchecked:  # pytest's outcome "undecided" (pytest_report_teststatus)
            item.stash[undecided_key] = unchecked
            item.user_properties.append(("webperf.outcome", outcome.CATEGORY))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test that passed with checks not checked carries them on its report (an
    attribute xdist sends along), and its outcome reads as undecided."""
    report = yield
    unchecked = item.stash.get(undecided_key, None)
    if report.when == "call" and report.passed and unchecked:
        report.webperf_undecided = unchecked  # type: ignore[attr-defined]
        report.sections.append(("webperf: not checked", "\n".join(unchecked)))
    return report


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    """``3 passed, 2 undecided``: a test whose checks were not all checked is not a pass."""
    if report.when == "call" and report.passed and getattr(report, "webperf_undecided", None):
        return outcome.CATEGORY, outcome.LETTER, (outcome.WORD, {"yellow": True})
    return None


def _where(item: pytest.Item, exc: BaseException) -> str:
    """``test_x.py:12: ``, the line of the test (or of its fixture) that called into
    webperf when ``exc`` was raised, or nothing when no such call is on the way."""
    package = str(Path(__file__).parent) + os.sep
    caller = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(package):
            caller = (filename, tb.tb_lineno)
        elif caller is not None:  # the first call from outside into webperf
            break
        tb = tb.tb_next
    if tb is None or caller is None:
        return ""
    filename, line = caller
    try:
        shown = str(Path(filename).relative_to(item.config.rootpath))
    except ValueError:
        shown = filename
    return f"{shown}:{line}: "


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(session_key, None)
    if session is None or not session.measurements:
        return
    terminalreporter.write_sep("=", "webperf")
    lines = session.summary(verbose=config.get_verbosity() > 0)
    summary = group_summary_advice(lines, advice_of(session.measurements))
    for line in [*summary, *_settings_lines(config), *session.finished]:
        terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """A fixture of the test's that starts a target (``webperf.process`` in the user's
    own fixture) and fails to errors the test in one line, as inside the test."""
    _note_settings(item)
    failure = None
    try:
        return (yield)
    except WebperfError as exc:
        failure = f"{_where(item, exc)}{type(exc).__name__}: {exc}"
    pytest.fail(failure, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """A target that fails as it stops (after the test) errors the test in one line too."""
    failure = None
    try:
        return (yield)
    except WebperfError as exc:
        failure = f"{_where(item, exc)}{type(exc).__name__}: {exc}"
    pytest.fail(failure, pytrace=False)


def _note_settings(item: pytest.Item) -> None:
    """Note the settings a webperf test runs with and where they came from (for -v)."""
    session = item.config.stash.get(session_key, None)
    if session is None or "webperf" not in getattr(item, "fixturenames", ()):
        return
    callspec = getattr(item, "callspec", None)
    concurrency = callspec.params.get("webperf_concurrency") if callspec is not None else None
    try:
        test = _item_config(item, session.config)
    except pytest.UsageError:
        return  # the fixture reports it
    settings = item.config.stash.setdefault(settings_key, {})
    settings[item.nodeid] = explain(test, session.config, concurrency)


def _settings_lines(config: pytest.Config) -> list[str]:
    """With -v: the settings each test ran with, where not from the command line."""
    settings = config.stash.get(settings_key, {})
    if config.get_verbosity() < 1 or not settings:
        return []
    return ["webperf settings:", *(f"  {nodeid}: {text}" for nodeid, text in settings.items())]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Baselines and reports are written, and containers go, however the run ended
    (Ctrl-C included); the terminal summary only shows what was done. What could not
    be written (a read-only directory) is one line each and fails the run."""
    webperf = session.config.stash.get(session_key, None)
    problems: list[str] = []
    try:
        if webperf is not None:
            webperf.finish()
            problems = webperf.problems
    except WebperfError as exc:
        problems = [f"webperf: {type(exc).__name__}: {exc}"]
    finally:
        with contextlib.suppress(WebperfError):
            remove_session_containers()
        remote = remote_of(webperf.config) if webperf is not None else None
        if webperf and remote and not hasattr(session.config, "workerinput"):
            webperf.finished.append(f"webperf: end of session: {farewell(remote)}")
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for line in problems:
            if reporter is not None:
                reporter.write_line(line, red=True)
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif webperf is not None and session.exitstatus == pytest.ExitCode.OK:
        code = undecided_exit(webperf.measurements, webperf.config.undecided_exit)
        session.exitstatus = session.exitstatus if code is None else code


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def _extensions(config: pytest.Config) -> Extensions:
    """The hooks of hookspec.py, as the session calls them."""
    hook = config.hook
    return Extensions(
        update_machine_info=lambda info: hook.pytest_webperf_update_machine_info(
            config=config, machine_info=info
        ),
        update_json=lambda data: hook.pytest_webperf_update_json(config=config, report=data),
    )


@pytest.fixture
def _webperf_turn(request: pytest.FixtureRequest) -> Generator[None]:
    """Held around the ``webperf`` fixture (set up before it, torn down after its
    servers stop): under pytest-xdist, one webperf test measures at a time."""
    with _session(request.config).turn():
        yield
