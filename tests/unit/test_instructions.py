"""What a counted window's dumps say per request: names read one way, allocations counted
once from outside the allocators, inclusive cost from stacks and from arcs, the
differential of two sides (exclusive changes add up to the total's; a function named only
when every repetition agrees), and real dumps of a C server."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.profiling.callgrind import parse, parse_file
from pytest_webperf.profiling.instructions import (
    DEEPER,
    OTHER,
    Window,
    calls_into,
    diff,
    exclusive_changes,
    is_allocator,
    merged_stacks,
    named,
    named_own,
    window_of,
)
from pytest_webperf.profiling.naming import context_frames, function_of

SAMPLES = Path(__file__).parent / "fixtures" / "callgrind"


@pytest.mark.parametrize(
    ("name", "frames"),
    [
        ("main", ["main"]),
        ("fib'2", ["fib"]),
        ("malloc@@GLIBC_2.2.5", ["malloc"]),
        ("c'a'main", ["main", "a", "c"]),
        ("f'2'f'main", ["main", "f", "f"]),
        ("malloc'serve'main", ["main", "serve", "malloc"]),
    ],
)
def test_a_name_is_read_as_its_frames_root_first(name: str, frames: list[str]) -> None:
    assert list(context_frames(name)) == frames
    assert function_of(name) == frames[-1]


@given(st.text(alphabet="abc'2@_.", min_size=1, max_size=20))
def test_canonical_names_are_idempotent(name: str) -> None:
    once = function_of(name)
    assert function_of(once) == once


@pytest.mark.parametrize(
    ("name", "allocator"),
    [
        ("malloc", True),
        ("calloc", True),
        ("posix_memalign", True),
        ("operator new(unsigned long)", True),
        ("operator new[](unsigned long, std::nothrow_t const&)", True),
        ("free", False),
        ("runtime.mallocgc", False),  # Go's own heap: a runtime's allocator, counted too
        ("PyObject_Malloc", False),
        ("my_malloc_wrapper", False),
    ],
)
def test_allocators_are_libcs_and_operator_new(name: str, allocator: bool) -> None:
    assert is_allocator(name) is allocator


def test_an_allocation_is_counted_once_from_outside_the_allocators() -> None:
    text = (
        "events: Ir\nfn=app\ncfn=malloc\ncalls=3 1\n1 30\ncfn=operator new(unsigned long)\n"
        "calls=2 1\n1 40\ncfn=realloc@@GLIBC_2.2.5\ncalls=1 1\n1 9\n"
        "fn=operator new(unsigned long)\ncfn=malloc\ncalls=2 1\n1 20\n"
        "fn=realloc\ncfn=malloc\ncalls=1 1\n1 5\n"
    )
    profile = parse(text.splitlines())
    assert calls_into(profile, is_allocator) == {
        "malloc": 3,
        "operator new(unsigned long)": 2,
        "realloc": 1,
    }
    assert window_of(profile, 3).allocations == 6


def cpython(object_calls: int, libc_calls: int, large: int) -> str:
    """A window of a CPython server: ``object_calls`` through CPython's allocator (``large``
    of them big enough that it asks libc, through PyMem_RawMalloc and a function of its
    own callgrind names by address), ``libc_calls`` straight to malloc (a Rust extension)."""
    return (
        f"events: Ir\nfn=handler\ncfn=PyObject_Malloc\ncalls={object_calls} 1\n1 90\n"
        f"cfn=malloc\ncalls={libc_calls} 1\n1 50\n"
        f"fn=PyObject_Malloc\ncfn=_PyObject_Malloc\ncalls={object_calls} 1\n1 80\n"
        f"fn=_PyObject_Malloc\ncfn=PyMem_RawMalloc\ncalls={large} 1\n1 20\n"
        f"fn=PyMem_RawMalloc\ncfn=0x0000000004936730\ncalls={large} 1\n1 15\n"
        f"fn=0x0000000004936730\ncfn=malloc\ncalls={large} 1\n1 10\n"
    )


def test_allocations_moved_from_cpythons_allocator_to_malloc_read_as_they_happened() -> None:
    # pydantic 1 -> 2, per request: about 9,100 of CPython's allocator's and 75 of libc's
    # became 1,500 and 167; libc's alone read +123 %, every allocation once reads the fall
    before = window_of(parse(cpython(9_100, 75, 40).splitlines()), 1)
    after = window_of(parse(cpython(1_500, 167, 40).splitlines()), 1)
    assert (before.libc_allocations, after.libc_allocations) == (75 + 40, 167 + 40)
    assert (before.allocations, after.allocations) == (9_100 + 75, 1_500 + 167)
    assert after.allocations < before.allocations  # the direction that happened
    assert before.runtime_allocations == {"PyObject_Malloc": 9_100}
    # and back: from malloc to CPython's allocator reads as a rise
    assert window_of(parse(cpython(500, 10, 0).splitlines()), 1).allocations == 510


TREE = """\
events: Ir
ob=/srv/server
fn=main
1 10
cfn=a
calls=1 1
1 60
cfn=b
calls=2 1
1 30
fn=a
1 40
cfn=c
calls=1 1
1 20
fn=b
1 30
fn=c
1 20
"""


def test_inclusive_cost_from_the_call_arcs() -> None:
    window = window_of(parse(TREE.splitlines()), 10)
    assert window.instructions == 100 and window.instructions_per_req == 10.0
    assert window.exclusive[("server", "a")] == 40
    assert window.inclusive[("server", "main")] == 100
    assert window.inclusive[("server", "a")] == 60
    assert window.inclusive[("server", "c")] == 20
    assert not window.stacks  # no callers kept: no stacks


CONTEXTS = """\
events: Ir
ob=/srv/server
fn=main
1 5
fn=c'a'main
1 7
fn=c'b'main
1 3
fn=f'2'f'main
1 4
fn=x'y'z
1 2
"""


def test_stacks_and_their_inclusive_cost_from_the_callers_kept() -> None:
    window = window_of(parse(CONTEXTS.splitlines()), 1, callers=3)
    assert window.stacks == {
        "main": 5,
        "main;a;c": 7,
        "main;b;c": 3,
        "main;f;f": 4,
        "z;y;x": 2,
    }
    assert sum(window.stacks.values()) == window.instructions
    assert window.exclusive[("server", "c")] == 10  # both contexts of c
    assert window.inclusive[("server", "main")] == 19
    assert window.inclusive[("server", "f")] == 4  # a recursion counted once
    # with 2 callers kept, a context of 2 callers may have been cut: drawn under [deeper]
    shallow = window_of(parse(CONTEXTS.splitlines()), 1, callers=2)
    assert shallow.stacks["[deeper];main;a;c"] == 7 and shallow.stacks["main"] == 5
    assert DEEPER == "[deeper]"


def _window(exclusive: dict[str, int], requests: int = 10) -> Window:
    table = {("server", name): cost for name, cost in exclusive.items()}
    return Window(
        requests=requests,
        instructions=sum(exclusive.values()),
        allocations=0,
        runtime_allocations={},
        processes=1,
        exclusive=table,
        inclusive=table,
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 10**6), min_size=1),
            st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 10**6), min_size=1),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_exclusive_changes_add_up_to_the_totals_change(
    pairs: list[tuple[dict[str, int], dict[str, int]]],
) -> None:
    windows = [(_window(a), _window(b)) for a, b in pairs]
    found = diff(windows)
    every = exclusive_changes(windows)
    assert math.fsum(every.values()) == pytest.approx(
        found.change_total - found.base_total, abs=1e-6 * max(1.0, found.base_total)
    )
    for change in found.changes:  # the listed ones are those changes (sums of floats: 1e-9)
        assert change.change == pytest.approx(every[change.function], abs=1e-9)


def test_the_function_that_grew_is_named_first() -> None:
    base = {"serve": 12_184_000, "memmem": 321_000, "snprintf": 92_000}
    grown = {**base, "serve": base["serve"] + 180_000}
    found = diff([(_window(base, 1000), _window(grown, 1000))] * 2)
    first = found.changes[0]
    assert first.function == ("server", "serve") and first.credible
    assert first.change == pytest.approx(180.0)
    assert [c.credible for c in found.changes[1:]] == [False, False]


def test_one_pair_names_nothing() -> None:
    base = {"serve": 1000}
    found = diff([(_window(base), _window({"serve": 2000}))])
    assert found.pairs == 1 and not any(c.credible for c in found.changes)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([100.0, 100.0], [110.0, 110.0], True),  # exact and apart
        ([100.0, 104.0], [106.0, 108.0], False),  # apart, by less than twice a range
        ([100.0, 101.0], [110.0, 111.0], True),
        ([100.0, 110.0], [105.0, 115.0], False),  # overlapping
        ([100.0], [200.0], False),  # one repetition a side: no range known
        ([1000.0, 1000.0], [1000.05, 1000.05], False),  # less than half an instruction
    ],
)
def test_a_function_is_named_when_every_repetition_agrees(
    a: list[float], b: list[float], expected: bool
) -> None:
    assert named(a, b, total=1000.0) is expected


@pytest.mark.parametrize(
    ("own", "within", "expected"),
    [
        # a source frame's own: one repetition a side wanders (its allocator), its
        # bytecode's part changed exactly
        (([100.0, 120.0], [130.0, 150.0]), [([60.0, 60.0], [70.0, 70.0])], True),
        (([100.0, 120.0], [130.0, 150.0]), [([60.0, 60.0], [60.0, 60.0])], False),  # no part
        (([100.0, 120.0], [110.0, 150.0]), [([60.0, 60.0], [70.0, 70.0])], False),  # overlap
        (([100.0, 120.0], [130.0, 150.0]), [([60.0, 60.0], [50.0, 50.0])], False),  # other way
        (([100.0, 100.0], [110.0, 110.0]), [], True),  # exact: named as any function is
    ],
)
def test_a_source_frames_own_cost_is_named_by_a_part_that_repeats(
    own: tuple[list[float], list[float]],
    within: list[tuple[list[float], list[float]]],
    expected: bool,
) -> None:
    assert named_own(own, within, total=1000.0) is expected


def test_small_stacks_are_merged_into_other() -> None:
    window = Window(1, 10**6, 0, {}, 1, {}, {}, stacks={"main": 10**6 - 3, "main;tiny": 3})
    stacks, requests = merged_stacks([window, window])
    assert stacks == {"main": 2 * (10**6 - 3), OTHER: 6} and requests == 2


def test_a_real_c_dump_counts_its_requests_mallocs() -> None:
    """c-extra: 100 keep-alive requests to a C server allocating once per request (and
    once per connection), zeroed after a warm-up and dumped after the 100th."""
    window = window_of(parse_file(SAMPLES / "c-extra.callgrind"), 100)
    assert window.allocations == 101
    assert window.instructions == parse_file(SAMPLES / "c-extra.callgrind").totals()["Ir"]
    assert calls_into(parse_file(SAMPLES / "c-extra.callgrind"), lambda n: n == "write") == {
        "write": 200
    }
    serve = ("hello", "serve")
    assert window.exclusive[serve] < window.inclusive[serve] <= window.instructions


def test_a_real_dump_with_callers_kept_folds_to_its_total() -> None:
    profile = parse_file(SAMPLES / "c-separate-callers20-1000req.callgrind")
    window = window_of(profile, 1000, callers=20)
    assert sum(window.stacks.values()) == window.instructions
    assert window.instructions_per_req == pytest.approx(14_312.576)
    plain = window_of(profile, 1000)
    assert plain.exclusive == window.exclusive  # contexts merge into their function


def test_the_catalogue_nginx_counts_five_allocations_a_request() -> None:
    window = window_of(parse_file(SAMPLES / "nginx-catalogue-container-1000req.callgrind"), 1000)
    assert window.allocs_per_req == pytest.approx(5.0, abs=0.01)
    assert window.processes == 1
