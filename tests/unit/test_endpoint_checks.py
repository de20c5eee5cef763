"""Per-endpoint checks and figures of a request mix: the grammar (``checks``), the verdict
(``decide.decide``, stored baseline and A/B alike), ``Measurement.endpoints`` and the
reports' rows. RunResults are built by hand, with ``endpoints`` as the mix records them."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.test_compare import make, make_run
from tests.unit.test_report_html import assert_finite
from tests.unit.test_report_html import check as check_html

from pytest_webperf.errors import OptionError
from pytest_webperf.gate.decide import decide
from pytest_webperf.gate.grammar import AbsoluteCheck, RelativeCheck, parse_check, parse_checks
from pytest_webperf.gate.metrics import BY_SPELLING, METRICS
from pytest_webperf.models.endpoints import EndpointResult, EndpointSummary
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.report import verdicts as checks_view
from pytest_webperf.report.html.page import render_html
from pytest_webperf.report.json_report import report
from pytest_webperf.report.markdown import render_markdown
from pytest_webperf.report.terminal import summary

# --- builders ----------------------------------------------------------------------------

SECONDS = 20.0


def latency(p95_ms: float) -> Latency:
    return Latency(
        mean_ms=p95_ms / 2,
        p50_ms=p95_ms / 2,
        p90_ms=p95_ms * 0.9,
        p95_ms=p95_ms,
        p99_ms=p95_ms * 1.5,
        p999_ms=p95_ms * 2,
        max_ms=p95_ms * 3,
    )


def endpoint(
    name: str, rps: float, p95_ms: float, *, errors: int = 0, weight: float | None = None
) -> EndpointResult:
    return EndpointResult(
        name=name,
        method="POST" if name == "create" else "GET",
        requests=round(rps * SECONDS),
        errors=errors,
        bytes=round(rps * SECONDS) * 100,
        duration_s=SECONDS,
        latency=latency(p95_ms),
        weight=weight,
    )


def mix_run(rep: int, endpoints: Sequence[EndpointResult]) -> RunResult:
    """A repetition whose own figures are the sum over its endpoints (as the mix's are)."""
    rps = sum(e.requests for e in endpoints) / SECONDS
    run = make_run(rps, seconds=int(SECONDS), rep=rep, errors=sum(e.errors for e in endpoints))
    return dataclasses.replace(run, endpoints={e.name: e for e in endpoints})


# Repetition-to-repetition wobble, so each side has a spread.
WOBBLE = (1.0, 1.02, 0.98, 1.01, 0.99)


def mix(
    read_p95: float = 10.0,
    create_p95: float = 20.0,
    *,
    reps: int = 5,
    names: tuple[str, str] = ("/items", "create"),
    create_errors: int = 0,
    shift: int = 0,
) -> Measurement:
    """A 3:1 mix over ``reps`` repetitions: ``/items`` reads, ``create`` writes; ``shift``
    rotates the wobble (so the pairs of an A/B run differ)."""
    runs = []
    for i in range(reps):
        w = WOBBLE[(i + shift) % len(WOBBLE)]
        runs.append(
            mix_run(
                i,
                [
                    endpoint(names[0], 750 * w, read_p95 * w, weight=0.75),
                    endpoint(names[1], 250 * w, create_p95 * w, errors=create_errors, weight=0.25),
                ],
            )
        )
    return make(runs)


def by_check(verdict: Any) -> dict[str, Mapping[str, Any]]:
    return {c["check"]: c for c in verdict.checks}


# --- the grammar --------------------------------------------------------------------------


def test_an_endpoint_is_named_in_brackets() -> None:
    assert parse_checks("p95[create]:10%,rps:5%") == (
        RelativeCheck("p95", 10, "create"),
        RelativeCheck("rps", 5),
    )
    assert parse_check("error_rate[/login]<0.01") == AbsoluteCheck(
        "error_rate", "<", 0.01, "/login"
    )
    assert parse_check("P95_MS [ /api/v1/items?page=2 ] : +12.5 %") == RelativeCheck(
        "p95", 12.5, "/api/v1/items?page=2"
    )
    assert parse_check("errors[GET /a b.c-d_e]:0") == AbsoluteCheck(
        "errors", "<=", 0, "GET /a b.c-d_e"
    )
    assert str(parse_check("p99_ms[create]<500")) == "p99_ms[create]<500"
    assert str(parse_check("rps[/a]:-5%")) == "rps[/a]:5%"


def test_an_endpoint_check_is_not_the_whole_runs() -> None:
    assert parse_checks("p95:10%,p95[create]:10%,p95[/a]:10%") == (
        RelativeCheck("p95", 10),
        RelativeCheck("p95", 10, "create"),
        RelativeCheck("p95", 10, "/a"),
    )
    with pytest.raises(OptionError, match="given twice"):
        parse_checks("p95[create]:10%,p95_ms[ create ]:10%")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cpu_per_req[create]:5%", "cpu_per_req cannot be checked per endpoint"),
        ("cpu[create]:5%", "server's CPU and memory belong to the whole run"),
        ("rss_mb[create]<100", "rss cannot be checked per endpoint"),
        ("lost[create]:0", "MQTT figure"),
        ("tps[x]:5%", "MQTT figure"),
        ("e2e_p99[x]:5%", "MQTT figure"),
        ("service_p99[x]:5%", "not recorded per endpoint"),
        ("p95[a[b]]:10%", "brackets do not nest"),
        ("p95[]:10%", "bad endpoint"),
        ("p95[  ]:10%", "bad endpoint"),
        ("p95[create:10%", "METRIC[ENDPOINT]"),
        ("p95]create[:10%", "METRIC[ENDPOINT]"),
        ("p95[create]:10", "write p95[create]:10% for a change"),
        ("rps[create]:+5%", "write rps[create]:5%"),
        ("nope[create]:5%", "unknown metric 'nope'"),
    ],
)
def test_bad_endpoint_checks_are_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(OptionError, match=None) as raised:
        parse_check(text)
    message = str(raised.value)
    assert says in message and "\n" not in message


def test_a_comma_ends_a_check_so_an_endpoint_name_cannot_hold_one() -> None:
    with pytest.raises(OptionError):
        parse_checks("p95[a,b]:10%")
    with pytest.raises(OptionError, match="bad endpoint"):
        RelativeCheck("p95", 10, "a,b")


SPLIT = sorted(name for name, m in BY_SPELLING.items() if m.per_endpoint is not None)
# Endpoint names as a mix or a locustfile spells them: paths, dotted, spaced, unicode.
NAMES = (
    st.text(
        alphabet=st.characters(
            blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="[],\x85\xa0"
        ),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    .filter(lambda s: bool(s) and s.isprintable())
)


@given(
    name=st.sampled_from(SPLIT),
    endpoint=NAMES,
    number=st.floats(min_value=0, max_value=1e9, allow_nan=False),
    op=st.sampled_from(["<", "<=", ">", ">=", ":%"]),
)
def test_endpoint_checks_round_trip(name: str, endpoint: str, number: float, op: str) -> None:
    metric = BY_SPELLING[name]
    check: RelativeCheck | AbsoluteCheck = (
        RelativeCheck(metric.name, number, endpoint)
        if op == ":%"
        else AbsoluteCheck(metric.name, op, number, endpoint)  # type: ignore[arg-type]
    )
    assert check.endpoint == endpoint
    again = parse_check(str(check))
    assert again == check and again.endpoint == endpoint
    assert parse_checks(f"{check}, rps:5%") == (check, RelativeCheck("rps", 5))


@given(name=st.sampled_from(sorted(n for n, m in METRICS.items() if m.per_endpoint is None)))
def test_every_metric_that_cannot_split_says_why(name: str) -> None:
    says = re.escape(f"{name} cannot be checked per endpoint ({name}[create]): ")
    with pytest.raises(OptionError, match=says + r"(the server's|it is) "):
        RelativeCheck(name, 5, "create")


# --- Measurement.endpoints ----------------------------------------------------------------


def test_measurement_endpoints_sum_and_average_over_repetitions() -> None:
    m = mix(create_errors=50)
    found = m.endpoints
    assert list(found) == ["/items", "create"]
    items, create = found["/items"], found["create"]
    assert items.requests == sum(r.endpoints["/items"].requests for r in m.runs)
    assert create.errors == 250 and create.error_rate == pytest.approx(250 / create.requests)
    assert items.rps == pytest.approx(sum(r.endpoints["/items"].rps for r in m.runs) / 5)
    assert items.share + create.share == pytest.approx(1.0)
    assert items.share == pytest.approx(0.75, abs=0.01) and items.weight == 0.75
    assert create.method == "POST"
    assert create.latency is not None
    assert create.latency.p95_ms == pytest.approx(
        sum(r.endpoints["create"].latency.p95_ms for r in m.runs) / 5
    )
    assert make([make_run(1000)]).endpoints == {}
    for summary_ in found.values():
        assert EndpointSummary.from_dict(json.loads(json.dumps(summary_.to_dict()))) == summary_


def test_a_repetition_without_an_endpoint_counts_as_zero_rps() -> None:
    first = mix_run(0, [endpoint("/a", 100, 5), endpoint("/b", 100, 5)])
    second = mix_run(1, [endpoint("/a", 100, 5)])
    found = make([first, second]).endpoints
    assert found["/b"].rps == pytest.approx(50)
    assert found["/a"].share == pytest.approx(2 / 3)


# --- the verdict: stored baseline ---------------------------------------------------------


def test_a_slower_endpoint_fails_naming_it_and_the_other_passes() -> None:
    verdict = decide(
        mix(create_p95=30.0), mix(), parse_checks("p95[create]:10%,p95[/items]:10%,rps:5%")
    )
    assert verdict.status == "regression"
    got = by_check(verdict)
    assert got["p95[create]:10%"]["outcome"] == "fail"
    assert got["p95[create]:10%"]["endpoint"] == "create"
    assert got["p95[create]:10%"]["metric"] == "p95"
    assert got["p95[/items]:10%"]["outcome"] == "pass"
    assert got["rps:5%"]["outcome"] == "pass"
    assert len(verdict.reasons) == 1
    assert verdict.reasons[0].startswith("p95[create] 20ms -> 30ms (+50.0%, 95% CI")
    assert "beyond +10%" in verdict.reasons[0]


def test_the_whole_runs_p95_misses_a_regression_the_endpoints_check_catches() -> None:
    # the run's own latency is the mix's (make_run: the same for both sides)
    verdict = decide(mix(create_p95=30.0), mix(), parse_checks("p95:10%,p95[create]:10%"))
    got = by_check(verdict)
    assert got["p95:10%"]["outcome"] == "pass"
    assert got["p95[create]:10%"]["outcome"] == "fail"


def test_endpoint_rps_and_limits() -> None:
    slower = mix()
    slower = dataclasses.replace(
        slower,
        runs=tuple(
            dataclasses.replace(
                r,
                endpoints={
                    **r.endpoints,
                    "create": dataclasses.replace(
                        r.endpoints["create"], requests=r.endpoints["create"].requests // 2
                    ),
                },
            )
            for r in slower.runs
        ),
    )
    verdict = decide(slower, mix(), parse_checks("rps[create]:5%,rps[/items]:5%,p95_ms[create]<25"))
    got = by_check(verdict)
    assert got["rps[create]:5%"]["outcome"] == "fail"
    assert "rps[create] 250 -> 125" in got["rps[create]:5%"]["message"]
    assert got["rps[/items]:5%"]["outcome"] == "pass"
    assert got["p95_ms[create]<25"]["outcome"] == "pass"
    limit = decide(mix(), None, parse_checks("p95_ms[create]<15"), saving=True)
    assert limit.status == "regression"
    assert limit.reasons == ("p95_ms[create] 20ms breaks the limit p95_ms[create]<15",)


def test_endpoint_errors_are_rates_of_that_endpoints_requests() -> None:
    # 1 % of create's requests fail: 0.25 % of the run's, under a run-wide limit
    current = mix(create_errors=50)
    verdict = decide(current, mix(), parse_checks("error_rate[create]<0.005,error_rate<0.005"))
    got = by_check(verdict)
    assert got["error_rate[create]<0.005"]["outcome"] == "fail"
    assert got["error_rate[create]<0.005"]["current"] == pytest.approx(0.01)
    assert got["error_rate<0.005"]["outcome"] == "pass"
    relative = by_check(decide(current, mix(), parse_checks("errors[create]:50%")))
    assert relative["errors[create]:50%"]["outcome"] == "fail"
    assert "of requests" in relative["errors[create]:50%"]["message"]
    stray = mix_run(0, [endpoint("/items", 750, 10), endpoint("create", 250, 20, errors=1)])
    settled = decide(make([stray] * 3), mix(), parse_checks("errors[create]:50%"))
    assert settled.status == "pass"  # one stray error is not a regression, nor left open


def test_an_endpoint_the_baseline_lacks_is_skipped_and_said() -> None:
    base = mix(names=("/items", "update"))
    verdict = decide(mix(create_p95=90.0), base, parse_checks("p95[create]:10%,rps:5%"))
    got = by_check(verdict)["p95[create]:10%"]
    assert got["outcome"] == "skipped"
    assert "endpoint 'create' is not in the baseline" in got["message"]
    assert "its endpoints: /items, update" in got["message"]
    assert any("'create' is not in the baseline" in n for n in verdict.notes)
    single = decide(mix(), make([make_run(1000, rep=i) for i in range(3)]), (got_check(),))
    assert "it sent a single request shape" in single.checks[0]["message"]


def got_check() -> RelativeCheck:
    return RelativeCheck("p95", 10, "create")


def test_an_endpoint_this_run_did_not_send_fails_naming_it() -> None:
    verdict = decide(mix(), mix(), parse_checks("p95[craete]:10%"))
    assert verdict.status == "regression"
    assert verdict.reasons == (
        "p95[craete]:10%: no endpoint 'craete' in this run (its endpoints: /items, create); "
        "the check names an endpoint the workload did not send",
    )
    alone = decide(mix(), None, parse_checks("error_rate[craete]<0.1"), saving=True)
    assert alone.status == "regression"


def test_an_endpoint_missing_from_some_repetitions_is_judged_on_the_rest() -> None:
    runs = list(mix().runs)
    runs[2] = dataclasses.replace(runs[2], endpoints={"/items": runs[2].endpoints["/items"]})
    verdict = decide(make(runs), mix(), parse_checks("p95[create]:10%"))
    check = verdict.checks[0]
    assert check["outcome"] == "pass"
    assert "measured in 4 of 5 repetitions of this run" in check["message"]


def test_a_stored_baseline_keeps_its_endpoints() -> None:
    base = Measurement.from_dict(json.loads(json.dumps(mix().to_dict())))
    assert base.endpoints.keys() == mix().endpoints.keys()
    verdict = decide(mix(create_p95=30.0), base, parse_checks("p95[create]:10%"))
    assert verdict.status == "regression"


# --- the verdict: A/B ---------------------------------------------------------------------


def ab(change: Measurement, base: Measurement, spec: str, look: int = 1) -> Any:
    return decide(
        change, base, parse_checks(spec), instances=list(range(len(change.runs))), look=look
    )


def test_ab_fails_the_slower_endpoint_by_name() -> None:
    verdict = ab(mix(create_p95=30.0, shift=1), mix(), "p95[create]:10%,p95[/items]:10%")
    got = by_check(verdict)
    assert verdict.status == "regression"
    assert got["p95[create]:10%"]["outcome"] == "fail"
    assert got["p95[/items]:10%"]["outcome"] == "pass"
    assert verdict.reasons[0].startswith("p95[create] 20ms -> 30ms (+50.0%")


def test_ab_endpoint_absent_from_the_base_is_skipped_and_said() -> None:
    verdict = ab(mix(), mix(names=("/items", "update")), "p95[create]:10%,p95[/items]:10%")
    got = by_check(verdict)
    assert got["p95[create]:10%"]["outcome"] == "skipped"
    assert "endpoint 'create' is not in the base (A)" in got["p95[create]:10%"]["message"]
    assert got["p95[/items]:10%"]["outcome"] == "pass"
    missing = ab(mix(names=("/items", "update")), mix(), "p95[create]:10%")
    assert missing.status == "regression"
    assert "no endpoint 'create' in the change (B)" in missing.reasons[0]


def test_ab_unchanged_endpoints_pass() -> None:
    verdict = ab(mix(shift=2), mix(), "p95[create]:10%,rps[create]:5%,errors[create]:50%")
    assert verdict.status == "pass", verdict


# --- reports ------------------------------------------------------------------------------


def the_report(m: Measurement) -> dict[str, Any]:
    verdict = decide(m, mix(), parse_checks("p95[create]:10%,rps:5%"))
    return report([dataclasses.replace(m, verdict=verdict)], {})


def test_the_json_report_has_a_row_per_endpoint() -> None:
    data = json.loads(json.dumps(the_report(mix(create_p95=30.0, create_errors=50))))
    rows = data["tests"][0]["endpoints"]
    assert [r["name"] for r in rows] == ["/items", "create"]
    create = rows[1]
    assert create["method"] == "POST" and create["weight"] == 0.25
    assert create["errors"] == 250 and create["error_rate"] == pytest.approx(0.01)
    assert create["p95_ms"] == pytest.approx(30.0, rel=0.01)
    assert create["share"] == pytest.approx(0.25, abs=0.01)
    assert create["latency"]["p99_ms"] == pytest.approx(45.0, rel=0.01)
    check = data["tests"][0]["verdict"]["checks"][0]
    assert check["endpoint"] == "create" and check["check"] == "p95[create]:10%"
    single = report([make([make_run(1000)])], {})
    assert "endpoints" not in single["tests"][0]
    assert "per endpoint" not in render_html(single)


def test_the_terminal_shows_an_indented_row_per_endpoint_and_the_endpoint_check() -> None:
    lines = summary(the_report(mix(create_p95=30.0)))
    rows = [line for line in lines if "- POST create" in line or "- GET /items" in line]
    assert len(rows) == 2
    assert "25.0% (asked 25.0%)" in rows[1]
    assert "30.00" in rows[1] and "20.00" not in rows[1]
    table_end = next(i for i, line in enumerate(lines) if "p95[create]:10%" in line)
    assert any(line.lstrip().startswith("p95[create]:10%") for line in lines[table_end:])
    assert any("fail" in line and "p95[create]" in line for line in lines)


def test_markdown_rows_per_endpoint_under_the_measurement() -> None:
    text = render_markdown(the_report(mix(create_p95=30.0)))
    every = text.split("### Every test")[1]  # after the failed test's own checks
    table = [line for line in every.splitlines() if line.startswith("|")]
    create = [line for line in table if "↳ POST create" in line]
    assert len(create) == 1 and "asked 25.0%" in create[0]
    head = table[0].split("|")
    assert len(create[0].split("|")) == len(head)
    assert table.index(create[0]) == 4  # header, rule, the measurement, /items, create
    assert "p95\\[create\\]:10%" in text


def test_html_rows_per_endpoint_and_its_table() -> None:
    page = render_html(the_report(mix(create_p95=30.0)))
    check_html(page)
    assert_finite(page)
    assert "Latency per endpoint" in page and "Share of the requests per endpoint" in page
    assert page.count('<tr class="endpoint">') == 2
    assert "↳ POST create 25.0% (asked 25.0%)" in page
    assert "<h4>Endpoints</h4>" in page
    assert "p95[create]:10%" in page
    ab_report = report(
        [
            dataclasses.replace(
                mix(), base_runs=mix().runs, against={"ref": "main", "order": ["AB"] * 5}
            )
        ],
        {},
    )
    assert ab_report["tests"][0]["base_endpoints"][0]["name"] == "/items"
    ab_page = render_html(ab_report)
    check_html(ab_page)
    assert "p95 per endpoint: A and B" in ab_page
    assert "Endpoints of A (base)" in ab_page and "Endpoints of B (working tree)" in ab_page


def test_ab_pairs_of_an_endpoint_check_read_that_endpoint() -> None:
    change, base = mix(create_p95=30.0, shift=1), mix()
    verdict = ab(change, base, "p95[create]:10%,rps:5%")
    entry = report(
        [
            dataclasses.replace(
                change,
                verdict=verdict,
                base_runs=base.runs,
                against={"ref": "main", "order": ["AB", "BA"] * 2 + ["AB"]},
            )
        ],
        {},
    )["tests"][0]
    entry = json.loads(json.dumps(entry))
    assert checks_view.metric_names(entry) == ["p95[create]", "rps"]
    got = checks_view.pairs(entry, "p95[create]")
    assert got == [
        (
            pytest.approx(a.endpoints["create"].latency.p95_ms),
            pytest.approx(b.endpoints["create"].latency.p95_ms),
        )
        for a, b in zip(base.runs, change.runs, strict=True)
    ]
    head, rows = checks_view.pair_rows(entry)
    assert len(rows) == 5
    assert head[2:4] == ["p95[create] A", "p95[create] B"]
    assert checks_view.unit("p95[create]") == "p95 latency (ms), create"
    page = render_html({"tests": [entry]})
    assert "p95[create]: A and B per pair" in page


def test_a_sign_inside_an_endpoint_name_is_not_the_checks() -> None:
    check = {"check": "p95[a:-b]:10%", "metric": "p95", "threshold": 0.1, "endpoint": "a:-b"}
    assert checks_view.signed_threshold(check) == 0.1
    assert checks_view.signed_threshold({**check, "check": "rps[a:+b]:5%", "metric": "rps"}) == -0.1
    assert parse_check("rps[a:+b]:5%") == RelativeCheck("rps", 5, "a:+b")
