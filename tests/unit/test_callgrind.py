"""The callgrind file reader: random profiles written with and without name and position
compression read back equal (hypothesis), the specification's own examples, the cases it
leaves room for, and real dumps of a C server and of the catalogue's nginx."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.callgrind_writer import dump

from pytest_webperf.profiling.callgrind import (
    CallArc,
    CallgrindFormatError,
    FunctionKey,
    Part,
    Profile,
    parse,
    parse_file,
)

SAMPLES = Path(__file__).parent / "fixtures" / "callgrind"

# names as callgrind writes them: spaces, brackets, quotes and colons occur; a name never
# starts with "(" and a digit (the compressed form) and never holds a newline
_name = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=12
).filter(lambda s: not (s[0] == "(" and s[1:2].isdigit()) and s.strip() == s)
_names = (
    st.sampled_from(
        [
            "main",
            "malloc",
            "operator new(unsigned long)",
            "(below main)",
            "foo'2",
            "std::vector<int>::push_back(int const&)",
            "???",
            "__libc_start_main@@GLIBC_2.34",
            "0x0000000000401000",
        ]
    )
    | _name
)


def _add(table: dict[FunctionKey, list[int]], key: FunctionKey, values: list[int]) -> None:
    have = table.setdefault(key, [0] * len(values))
    for i, value in enumerate(values):
        have[i] += value


@st.composite
def parts(draw: st.DrawFn) -> Part:
    events = tuple(
        draw(
            st.lists(
                st.sampled_from(["Ir", "Dr", "Dw", "sysCount", "sysTime"]),
                min_size=1,
                max_size=3,
                unique=True,
            )
        )
    )
    positions = draw(st.sampled_from([("line",), ("instr", "line"), ("instr",)]))
    objects = draw(st.lists(_names, min_size=1, max_size=3, unique=True))
    files = draw(st.lists(_names, min_size=1, max_size=3, unique=True))
    functions = draw(
        st.lists(
            st.builds(FunctionKey, st.sampled_from(objects), st.sampled_from(files), _names),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    cost = st.lists(st.integers(0, 2**63), min_size=len(events), max_size=len(events))
    where = st.tuples(*[st.integers(0, 2**40) for _ in positions])
    part = Part(
        events=events, positions=positions, header={"pid": str(draw(st.integers(1, 2**22)))}
    )
    for fn in functions:
        for _ in range(draw(st.integers(0, 4))):
            file = draw(st.sampled_from([fn.file, *files]))
            part.lines[(fn, file, draw(where))] = draw(cost)
    for key, value in part.lines.items():
        _add(part.self_cost, key[0], value)
    for _ in range(draw(st.integers(0, 6))):
        caller, callee = draw(st.sampled_from(functions)), draw(st.sampled_from(functions))
        part.calls[(caller, callee)] = CallArc(draw(st.integers(0, 10**9)), draw(cost))
    return part


def _round_trip(profile: Profile, **options: bool) -> Profile:
    out = io.StringIO()
    dump(profile, out, **options)
    return parse(io.StringIO(out.getvalue()), keep_lines=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(parts(), min_size=1, max_size=3), st.booleans(), st.booleans())
def test_every_cost_and_call_is_read_back_as_written(
    written: list[Part], compress_names: bool, compress_positions: bool
) -> None:
    read = _round_trip(
        Profile(written), compress_names=compress_names, compress_positions=compress_positions
    )
    assert len(read.parts) == len(written)
    for got, want in zip(read.parts, written, strict=True):
        assert got.events == want.events and got.positions == want.positions
        assert got.header["pid"] == want.header["pid"]
        assert got.lines == want.lines
        assert got.self_cost == want.self_cost
        assert {k: (a.count, a.inclusive) for k, a in got.calls.items()} == {
            k: (a.count, a.inclusive) for k, a in want.calls.items()
        }
        assert [got.totals()[e] for e in got.events] == got.declared_totals


@settings(max_examples=100, deadline=None)
@given(parts())
def test_compression_changes_nothing_read(part: Part) -> None:
    plain = _round_trip(Profile([part]), compress_names=False, compress_positions=False)
    packed = _round_trip(Profile([part]))
    assert plain.parts[0].lines == packed.parts[0].lines
    assert plain.totals() == packed.totals()


@settings(max_examples=100, deadline=None)
@given(st.lists(parts(), min_size=1, max_size=3))
def test_a_profile_totals_its_parts(written: list[Part]) -> None:
    profile = Profile(written)
    for event in profile.events:
        assert profile.totals()[event] == sum(p.totals().get(event, 0) for p in written)


# The specification's extended example, with name compression (section 3.1.5).
SPEC_EXAMPLE = """\
# callgrind format
events: Instructions

fl=(1) file1.c
fn=(1) main
16 20
cfn=(2) func1
calls=1 50
16 400
cfi=(2) file2.c
cfn=(3) func2
calls=3 20
16 400

fn=(2)
51 100
cfi=(2)
cfn=(3)
calls=2 20
51 300

fl=(2)
fn=(3)
20 700
"""


def test_the_specification_example_reads_as_the_specification_says() -> None:
    profile = parse(SPEC_EXAMPLE.splitlines())
    (part,) = profile.parts
    main, func1 = FunctionKey("", "file1.c", "main"), FunctionKey("", "file1.c", "func1")
    func2 = FunctionKey("", "file2.c", "func2")
    assert part.self_cost == {main: [20], func1: [100], func2: [700]}
    assert part.calls[(main, func1)].count == 1 and part.calls[(main, func1)].inclusive == [400]
    assert part.calls[(main, func2)].count == 3 and part.calls[(func1, func2)].count == 2
    assert profile.totals() == {"Instructions": 820}


def test_subposition_compression_is_relative_to_the_last_cost_line() -> None:
    text = "positions: instr line\nevents: ticks\nfn=func\n0x80001234 90 1\n+3 * 5\n+1 +1 6\n"
    part = parse(text.splitlines(), keep_lines=True).parts[0]
    assert sorted(w for (_, _, w) in part.lines) == [
        (0x80001234, 90),
        (0x80001237, 90),
        (0x80001238, 91),
    ]


def test_fi_changes_the_cost_lines_file_not_the_function_and_calls_default_to_it() -> None:
    text = (
        "events: Ir\nob=a.so\nfl=x.c\nfn=f\n1 1\nfi=y.h\n2 2\ncfn=g\ncalls=1 5\n* 7\n"
        "fe=x.c\n3 3\ncob=b.so\ncfn=h\ncalls=2 9\n* 4\ncfn=g\ncalls=1 1\n* 1\n"
    )
    part = parse(text.splitlines(), keep_lines=True).parts[0]
    f = FunctionKey("a.so", "x.c", "f")
    assert part.self_cost == {f: [6]}
    assert (f, FunctionKey("a.so", "y.h", "g")) in part.calls  # the inlined call site's file
    assert (f, FunctionKey("b.so", "x.c", "h")) in part.calls
    assert (f, FunctionKey("a.so", "x.c", "g")) in part.calls  # cob/cfi reset after a call


def test_a_new_part_clears_name_compression() -> None:
    text = "events: Ir\nfn=(1) a\n1 5\ntotals: 5\npart: 2\nevents: Ir\nfn=(1)\n1 1\n"
    with pytest.raises(CallgrindFormatError, match="used before defined"):
        parse(text.splitlines())


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("events: Ir\nfn=a\ncfn=b\ncalls=1 1\nfn=c\n", "must be followed"),
        ("events: Ir\n1 5\n", "before any fn="),
        ("fn=a\n1 5\n", "before 'events:'"),
        ("events: Ir\nfn=a\n1 5 6\n", "more costs than events"),
        ("events: Ir\nfn=a\n1 x\n", "not a number"),
        ("events: Ir\nbogus line\n", "not a callgrind line"),
        ("events: Ir\nfn=a\ncalls=1 1\n1 5\n", "without cfn="),
    ],
)
def test_a_line_the_format_does_not_allow_is_named_with_its_number(text: str, why: str) -> None:
    with pytest.raises(CallgrindFormatError, match=why) as found:
        parse(text.splitlines())
    assert found.value.line_number >= 1


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.callgrind")), ids=lambda p: p.name)
def test_a_real_dump_adds_up_to_its_own_totals_line(sample: Path) -> None:
    profile = parse_file(sample)
    assert profile.parts
    for part in profile.parts:
        assert part.declared_totals is not None
        assert [part.totals()[e] for e in part.events] == part.declared_totals
