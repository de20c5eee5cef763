"""End-to-end tests: real containers, real swarms, through a pytest subprocess."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from pytest_webperf.errors import EngineUnavailable
from pytest_webperf.targets.engine import docker_client

# The modules whose assertions read timed figures (a verdict on rps, CPU per request or
# latency, a capacity, a pace kept, a sampler's accuracy): they run one at a time, alone
# on the machine, or two at a time when judged on A/B pairs alone (PAIRED below). The
# others check what a user sees and what is written (errors counted, reports, refusals,
# wiring, counts) and run four at a time (scripts/test.sh).
TIMED = {
    "test_against.py",
    "test_against_layouts.py",
    "test_arrival.py",
    "test_bisect.py",
    "test_capacity_ab.py",
    "test_endpoint_gate.py",
    "test_gate.py",
    "test_http2.py",
    "test_known_capacity.py",
    "test_locustfile.py",
    "test_noise.py",
    "test_paced.py",
    "test_profile_ab.py",
    "test_profile_jit.py",
    "test_profile_names.py",
    "test_resources.py",
    "test_sampler_containers.py",
    "test_stages.py",
    "test_streams.py",
    "test_study_ordering.py",
}


# In those modules, the tests that read none (a refusal, an error's kind, what is written,
# every message counted): they run on both cores too.
UNTIMED = {
    "test_against.py": {
        "test_an_unchanged_server_is_not_measured",
        "test_bad_input_is_a_one_line_usage_error",
        "test_outside_a_repository_is_a_usage_error",
    },
    "test_against_layouts.py": {
        "test_a_base_without_the_build_output_says_which_side_which_path_and_build",
    },
    "test_capacity_ab.py": {"test_a_server_unchanged_since_the_base_is_not_searched"},
    "test_profile_names.py": {"test_a_javascript_function_is_named_and_counted"},
    "test_gate.py": {
        "test_a_corrupt_baseline_fails_that_test_only_and_save_replaces_it",
        "test_ctrl_c_during_save_leaves_the_old_or_the_new_baseline_whole",
        "test_a_bad_compare_fail_spec_is_a_usage_error",
        "test_an_absolute_limit_in_a_marker_fails_without_a_baseline",
    },
    "test_http2.py": {
        "test_h2_and_h2c_against_nginx_land_a_mix_on_its_weights",
        "test_streams_reset_by_the_server_fail_with_their_error_code",
        "test_a_grpc_method_answering_unavailable_fails_as_that_kind_and_a_healthy_one_passes",
        "test_http2_from_a_server_that_speaks_http1_only_fails_in_one_line",
        "test_http1_to_a_server_that_speaks_h2c_only_is_refused_in_one_line_naming_http2",
    },
    # timing is made undecided by the server's own ageing, whatever the machine does;
    # the count decides
    "test_noise.py": {"test_count_auto_settles_a_cpu_check_timing_left_undecided"},
    "test_locustfile.py": {
        "test_a_locustfile_that_cannot_run_is_one_line_before_any_load",
        "test_a_task_exception_is_the_failure_reason_with_where_it_was_raised",
        "test_a_lean_http_user_subclass_with_two_tasks",
        "test_a_custom_user_class_is_labelled_by_what_ran_never_by_an_unsent_path",
    },
    "test_streams.py": {  # one run of eight inner tests: messages and closes counted
        "test_an_echo_server_answers_every_message_and_its_round_trips_are_reported",
        "test_a_server_that_closes_with_1011_fails_naming_the_code",
        "test_a_relay_dropping_every_50th_message_fails_with_the_loss_counted_exactly",
        "test_idle_connections_are_held_and_their_memory_reported",
        "test_a_fan_out_across_generator_processes_accounts_every_copy",
        "test_sse_streams_resume_after_last_event_id_with_nothing_lost",
        "test_answers_are_matched_in_turn_and_checked",
        "test_both_protocols_speak_tls_with_the_certificate_verified",
    },
}


# Of the timed tests, those judged on A/B pairs only (no stored baseline, no capacity
# search): the pairs interleave the two sides, so other load lands on both alike and the
# gate judges on the paired interval, as it does for a user whose CI machine is shared.
# They run two at a time (scripts/test.sh). None: every timed test of the module.
PAIRED: dict[str, set[str] | None] = {
    "test_against.py": None,
    "test_against_layouts.py": None,
    # the hunted-effect test reads a step of 1 s pairs against a 2 % threshold: beside
    # another test's bursts an unchanged step measured +25 % (+5.9..+48.3 %) once
    "test_bisect.py": {
        "test_bisect_names_the_commit_that_made_the_server_slower",
        "test_an_undecided_run_exits_as_asked_and_its_verdict_joins_the_history",
        "test_a_server_cpu_read_as_zero_is_not_a_pass",
    },
    "test_http2.py": {"test_an_ab_run_of_a_slower_grpc_method_fails_its_check_naming_it"},
    "test_locustfile.py": {"test_a_locustfile_with_two_names_is_gated_against_its_base"},
    "test_profile_ab.py": {
        "test_the_function_made_costlier_is_named_first",
        "test_an_a_a_run_names_nothing_and_says_why",
    },
    "test_profile_jit.py": None,
    "test_profile_names.py": {
        "test_a_javascript_function_is_named_timed_and_an_anonymous_one_by_its_line"
    },
    "test_streams.py": {"test_an_sse_server_whose_first_event_comes_200ms_later_fails_ttfe_in_ab"},
}


# The slowest tests (seconds of one worker on a 2-core machine: --durations), started
# first, so that no worker is left running one at the end while the others idle. With
# --maxschedchunk=1 (scripts/test.sh) a worker takes one more test at a time, in this
# order. A hint only: a test missing here runs in collection order after these.
SLOW_FIRST: dict[str, dict[str, float]] = {
    "test_counted.py": {  # two at a time, load average 8-9 (the Python one names on 3.12 too)
        "test_a_python_server_counted_against_its_base": 150,
        "test_a_c_server_counted_against_its_base": 55,
        "test_catalogue_containers_are_counted_in_their_valgrind_layer": 42,
    },
    "test_counted_loads.py": {
        "test_a_unary_grpc_method_and_an_h2c_request_are_counted": 36,
        "test_a_mix_is_counted_in_the_same_order_on_both_sides": 10,
        "test_what_cannot_be_counted_is_refused_in_one_line_from_every_path": 2,
    },
    "test_wheel.py": {
        "test_the_wheel_ships_the_catalogue": 73,  # the wheel built (session)
    },
    "test_profile_names.py": {
        "test_a_javascript_function_is_named_and_counted": 103,  # Node under Valgrind
        "test_a_javascript_function_is_named_timed_and_an_anonymous_one_by_its_line": 72,
    },
    "test_suites.py": {  # a quarter of the catalogue each, at load average 4
        "test_every_catalogue_server_answers_in_each_of_its_protocols": 55,
    },
    "test_bisect.py": {
        "test_bisect_names_the_commit_that_made_the_server_slower": 68,
        "test_steps_too_noisy_for_the_threshold_are_read_against_the_hunted_effect": 38,
    },
    "test_profile_jit.py": {
        "test_a_java_method_is_named": 67,
        "test_a_tomcat_a_a_run_names_nothing": 62,
        "test_a_node_a_a_run_names_nothing": 48,
        "test_a_javascript_function_is_named_with_its_file": 45,
    },
    "test_guesses.py": {
        "test_the_baseline_key_follows_the_user_however_it_was_given": 64,
    },
    "test_builds.py": {  # the mean of three runs at load averages of 13-17
        "test_a_pip_project_run_from_its_virtual_environment_starts_both_sides_twice": 72,
        "test_an_npm_project_gets_its_node_modules_from_the_cache_the_second_time": 45,
        "test_a_go_module_gets_its_binary_from_the_cache_the_second_time": 45,
    },
    "test_against_layouts.py": {
        "test_a_c_server_built_on_both_sides_is_gated": 61,
        "test_a_server_outside_the_tests_directory_is_measured_not_skipped": 33,
    },
    "test_streams.py": {
        "test_an_echo_server_answers_every_message_and_its_round_trips_are_reported": 53,
        "test_an_sse_server_whose_first_event_comes_200ms_later_fails_ttfe_in_ab": 43,
    },
    "test_remote_workers.py": {
        "test_the_worker_container_with_host_networking_joins": 47,
        "test_the_plugin_waits_for_a_remote_worker_and_binds_the_target": 31,
    },
    "test_report_browser.py": {
        "test_every_chart_of_a_real_report_shows_data": 44,
        "test_a_failed_ab_report_opens_on_the_failed_check_and_the_function_that_changed": 60,
    },
    "test_gate.py": {
        "test_a_corrupt_baseline_fails_that_test_only_and_save_replaces_it": 42,
    },
    "test_profile_ab.py": {
        "test_an_a_a_run_names_nothing_and_says_why": 32,
        "test_the_function_made_costlier_is_named_first": 32,
    },
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def slowness(item: pytest.Item) -> float:
        name = getattr(item, "originalname", item.name)  # a test function's, unparametrized
        return SLOW_FIRST.get(item.path.name, {}).get(name, 0.0)

    items.sort(key=lambda item: -slowness(item))
    for item in items:
        if "tests/e2e/" in item.nodeid or item.nodeid.startswith("e2e/"):
            item.add_marker(pytest.mark.e2e)
            module, name = item.path.name, item.name.split("[")[0]
            if module in TIMED and name not in UNTIMED.get(module, ()):
                item.add_marker(pytest.mark.timed)
                if module in PAIRED and name in (PAIRED[module] or {name}):
                    item.add_marker(pytest.mark.paired)


@pytest.fixture(scope="session")
def engine() -> None:
    """Fail (not skip) without an engine: the README's set-up provides one."""
    try:
        docker_client()
    except EngineUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


class _Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = b"<h1>Hello World</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    """A plain threaded HTTP server on loopback (no engine needed)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
