"""A counted window's functions under the names shown (``profiling/naming.py``): JIT code
named from its process's perf map (CPython 3.12's trampolines, V8's code), code without
symbols under its nearest named caller and never a bare address, a source frame's own
cost; and the differential ranking the user's code first (``instructions.rank``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.profiling.callgrind import CallArc, FunctionKey, Part, Profile
from pytest_webperf.profiling.instructions import (
    FunctionChange,
    Window,
    diff,
    label,
    rank,
    window_of,
)
from pytest_webperf.profiling.naming import Named, is_address, is_held
from pytest_webperf.profiling.perfmap import PerfMap
from pytest_webperf.profiling.runtimes import naming_notes

PYTHON = "/usr/lib/libpython3.12.so.1.0"
SERVER = "/srv/server"
LIBZ = "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"
JIT = "???"
MAP = PerfMap.parse(
    "1000 b py::render_work:/srv/app/app.py\n"
    "100b b py::Handler.do_GET:/srv/app/app.py\n"
    "1016 b py::serve_forever:/usr/lib/python3.12/socketserver.py\n"
    "2000 80 JS:*checksum /srv/app/app.js:6:19\n"
    "2100 40 JS:^ /srv/app/app.js:26:23\n"
)


def address(value: int) -> str:
    return f"0x{value:016x}"


def part(costs: dict[tuple[str, str], int], calls: dict | None = None, pid: int = 7) -> Part:
    found = Part(events=("Ir",), header={"pid": str(pid)})
    for (obj, name), cost in costs.items():
        found.self_cost[FunctionKey(obj, "", name)] = [cost]
    for ((a_obj, a), (b_obj, b)), (count, cost) in (calls or {}).items():
        key = (FunctionKey(a_obj, "", a), FunctionKey(b_obj, "", b))
        found.calls[key] = CallArc(count, [cost])
    return found


def context(*frames: str) -> str:
    """A callgrind name with its callers kept, from frames given root first."""
    return "'".join(reversed(frames))


def test_a_python_function_is_named_with_its_own_and_inclusive_instructions() -> None:
    # serve_forever -> do_GET -> render_work, each through its trampoline and the eval loop;
    # render_work's multiplications in libpython are its own
    serve, get, render = (address(0x1000 + 0xB * i) for i in (2, 1, 0))
    loop = "_PyEval_EvalFrameDefault"
    costs = {
        (PYTHON, context(serve, loop, get, loop, render, loop)): 900,
        (PYTHON, context(serve, loop, get, loop, render, loop, "long_mul")): 600,
        (JIT, context(serve, loop, get, loop, render)): 4,
        (PYTHON, context(serve, loop, get, loop)): 50,
        (JIT, context(serve, loop, get)): 4,
        (JIT, serve): 4,
    }
    window = window_of(Profile([part(costs)]), 1, callers=40, maps={7: MAP})
    render = ("app.py", "render_work")
    assert window.own[render] == 900 + 600 + 4
    assert window.inclusive[render] == 900 + 600 + 4
    assert window.own[("app.py", "Handler.do_GET")] == 50 + 4
    by = {function: cost for (source, function), cost in window.own_by.items() if source == render}
    runtime = "libpython3.12.so.1.0"
    assert by == {(runtime, loop): 900, (runtime, "long_mul"): 600, render: 4}  # the whole own
    assert window.inclusive[("socketserver.py", "serve_forever")] == window.instructions
    assert window.kinds[render] == "user" and window.kinds[("socketserver.py", "serve_forever")]
    assert window.kinds[("socketserver.py", "serve_forever")] == "runtime"
    assert "render_work (app.py)" in next(iter(s for s in window.stacks if "long_mul" in s))
    assert window.maps == 1


def test_v8_code_is_named_and_an_anonymous_function_by_its_file_and_line() -> None:
    costs = {(JIT, address(0x2000)): 300, (JIT, address(0x2110)): 20, (JIT, address(0x2040)): 5}
    window = window_of(Profile([part(costs)]), 1, maps={7: MAP})
    assert window.exclusive[("app.js", "checksum")] == 305  # an address inside it, too
    assert window.exclusive[("app.js:26", "(anonymous)")] == 20
    assert label(("app.js:26", "(anonymous)")) == "(anonymous) app.js:26"


def test_code_without_symbols_is_shown_under_its_nearest_named_caller() -> None:
    deflate = address(0x4970)
    costs = {
        (SERVER, "main"): 10,
        (SERVER, "gzip_filter'main"): 20,
        (LIBZ, "deflate'gzip_filter'main"): 30,
        (LIBZ, f"{deflate}'deflate'gzip_filter'main"): 500,
        (LIBZ, f"{address(0x57E0)}'{deflate}'deflate'gzip_filter'main"): 70,
    }
    window = window_of(Profile([part(costs)]), 1, callers=40)
    held = ("libz.so.1.2.13", "deflate (libz.so.1.2.13) > [unknown]")
    assert window.exclusive[held] == 570  # both addresses: one frame of libz under deflate
    assert label(held) == "deflate (libz.so.1.2.13) > [unknown] (libz.so.1.2.13)"
    assert window.own[("server", "gzip_filter")] == 20 + 30 + 570  # the user's code holds it
    assert window.unnamed == {"libz.so.1.2.13": LIBZ}
    assert "main;gzip_filter;deflate;deflate (libz.so.1.2.13) > [unknown]" in "\n".join(
        window.stacks
    )


def test_without_stacks_code_without_symbols_goes_to_its_largest_caller() -> None:
    static = address(0x4970)
    costs = {(SERVER, "serve"): 10, (SERVER, "idle"): 1, (LIBZ, static): 500}
    calls = {
        ((SERVER, "serve"), (LIBZ, static)): (9, 450),
        ((SERVER, "idle"), (LIBZ, static)): (1, 50),
    }
    window = window_of(Profile([part(costs, calls)]), 1)
    held = ("libz.so.1.2.13", "serve (server) > [unknown]")
    assert window.exclusive[held] == 500 and window.inclusive[held] == 500
    assert window.inclusive[("server", "serve")] == 10 + 450  # its own call into it
    assert window.inclusive[("server", "idle")] == 1 + 50


def test_jit_code_no_map_holds_is_held_too() -> None:
    costs = {(SERVER, "main"): 1, (JIT, context("main", address(0x9000))): 40}
    window = window_of(Profile([part(costs)]), 1, callers=40, maps={7: MAP})
    assert window.exclusive[("jit", "main (server) > [unknown]")] == 40
    assert window.unnamed == {}  # no object to install symbols for


NAMES = st.sampled_from(
    [(SERVER, "main"), (SERVER, "serve"), (LIBZ, "deflate"), (PYTHON, "eval")]
    + [(LIBZ, address(a)) for a in (0x4970, 0x57E0)]
    + [(JIT, address(a)) for a in (0x1000, 0x2000, 0x2110, 0x9000)]
)


@given(
    st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=5), st.integers(0, 1000)), max_size=12),
    st.sampled_from([0, 2, 40]),
)
def test_naming_keeps_every_instruction_and_shows_no_bare_address(
    stacks: list[tuple[list[tuple[str, str]], int]], callers: int
) -> None:
    costs: dict[tuple[str, str], int] = {}
    for frames, cost in stacks:
        leaf_obj = frames[-1][0]
        names = context(*(name for _, name in frames[-(callers + 1) :]))
        key = (leaf_obj, names if callers else frames[-1][1])
        costs[key] = costs.get(key, 0) + cost
    window = window_of(Profile([part(costs)]), 1, callers=callers, maps={7: MAP})
    assert window.instructions == sum(costs.values())
    assert sum(window.exclusive.values()) == window.instructions
    shown = [*window.exclusive, *window.inclusive, *window.own]
    assert not any(is_address(name) for _, name in shown), shown
    assert all(not is_address(f) for s in window.stacks for f in s.split(";"))
    assert all(is_held(name) or not name.startswith("[") for _, name in shown)


def change(name: str, kind: str, figure: float, credible: bool = True) -> FunctionChange:
    return FunctionChange(("x", name), 0, figure, 0, figure, figure, figure, credible, kind=kind)


def test_the_users_code_comes_first_then_libraries_then_the_runtime() -> None:
    ranked = rank(
        [
            change("eval", "runtime", 7000),
            change("cleanse", "library", 8760),
            change("render_work", "user", 18060),
            change("tiny", "user", 10),  # under LEAD of the largest: ranked by size
            change("noise", "user", 90000, credible=False),
        ]
    )
    assert [c.function[1] for c in ranked] == ["render_work", "cleanse", "eval", "tiny", "noise"]


def _python_window(work: int, wander: int) -> Window:
    """A window of one request to a CPython 3.12 server whose ``hash_work`` runs its
    bytecode and arithmetic (``work`` rounds, exact) and obmalloc's pools (``wander``
    more in some fresh processes than in others): an e2e run's figures per request."""
    hash_work, serve = ("app.py", "hash_work"), ("socketserver.py", "serve_forever")
    loop, free = ("libpython3.12.so.1.0", "_PyEval_EvalFrameDefault"), ("x", "_PyObject_Free")
    own_by = {(hash_work, loop): 1_620 * work, (hash_work, free): 388_737 + wander}
    own_by[(serve, loop)] = 250_000
    exclusive = {loop: 1_620 * work + 250_000, free: 388_737 + wander}
    own = {hash_work: 1_620 * work + 388_737 + wander, serve: 250_000}
    total = sum(exclusive.values())
    return Window(
        1,
        total,
        0,
        {},
        1,
        exclusive,
        {},
        own=own,
        own_by=own_by,
        kinds={hash_work: "user", serve: "runtime", loop: "runtime", free: "runtime"},
    )


def test_a_python_function_whose_allocator_wanders_is_named_by_its_exact_part() -> None:
    # measured (e2e, CPython 3.12): hash_work's own 3,170,697 Ir/req in three fresh
    # processes of A and 3,204,986 in the fourth, all of it in _PyObject_Malloc/_Free;
    # B 2 % more rounds; its bytecode's change exact in every pair
    a = [_python_window(2000, w) for w in (34_289, 0, 0, 0)]
    b = [_python_window(2040, w) for w in (0, 0, 42_861, 0)]
    found = diff(list(zip(a, b, strict=True)))
    first = found.changes[0]
    assert label(first.function) == "hash_work (app.py)" and first.credible
    assert first.figure == 1_620 * 40 + (42_861 - 34_289) / 4
    # an A/A whose allocator wanders: nothing named
    same = diff([(a[0], a[1]), (a[2], a[3])])
    assert not any(c.credible for c in same.changes)
    # the exact part grew but the wandering one hides it in a pair: not named
    hidden = [_python_window(2040, w) for w in (0, -40_000, 0, 0)]
    changes = diff(list(zip(a, hidden, strict=True))).changes
    assert not next(c for c in changes if c.function[1] == "hash_work").credible


def test_an_unnamed_runtime_says_why_and_the_fix() -> None:
    old = window_of(Profile([part({("/usr/lib/libpython3.11.so.1.0", "eval"): 9})]), 1)
    (note,) = naming_notes("python", [old, old])
    assert "CPython 3.11 runs every one inside _PyEval_EvalFrameDefault" in note
    assert "3.12 or later" in note
    named = window_of(Profile([part({(JIT, address(0x1000)): 9})]), 1, maps={7: MAP})
    assert naming_notes("python", [named, named]) == []
    assert "baseline code" in naming_notes("node", [named])[0]  # said: builtins its own
    assert "--perf-basic-prof" in naming_notes("node", [old])[0]
    assert naming_notes("native", [old]) == []


def test_a_function_on_a_cycle_of_calls_has_no_inclusive_cost_from_the_arcs() -> None:
    # express's router: next -> handle -> next ...; the arcs count the nested call again
    costs = {(SERVER, "emit"): 1, (SERVER, "next"): 10, (SERVER, "handle"): 10, (SERVER, "leaf"): 5}
    calls = {
        ((SERVER, "emit"), (SERVER, "next")): (1, 25),
        ((SERVER, "next"), (SERVER, "handle")): (2, 24),
        ((SERVER, "handle"), (SERVER, "next")): (1, 14),
        ((SERVER, "handle"), (SERVER, "leaf")): (1, 5),
    }
    window = window_of(Profile([part(costs, calls)]), 1)
    assert window.inclusive[("server", "leaf")] == 5 and window.inclusive[("server", "emit")] == 26
    assert ("server", "next") not in window.inclusive  # 25 + 14 would count it twice
    (found,) = [
        c for c in diff([(window, window), (window, window)]).changes if c.function[1] == "next"
    ]
    assert found.change_inclusive_delta is None and found.to_dict()["change_total_ir"] is None


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=20))
def test_cycles_are_the_functions_that_reach_themselves(edges: list[tuple[int, int]]) -> None:
    named = Named()
    for a, b in edges:
        if a != b:
            named.arcs[(("x", str(a)), ("x", str(b)))] += 1
    graph = {a: {b for x, b in edges if x == a and b != a} for a, _ in edges}

    def reaches(start: int) -> bool:
        seen, todo = set(), list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node == start:
                return True
            if node not in seen:
                seen.add(node)
                todo += graph.get(node, ())
        return False

    assert named.cyclic() == {("x", str(n)) for n in graph if reaches(n)}


def test_without_stacks_a_javascript_functions_own_cost_holds_the_builtins_it_calls() -> None:
    # Node's baseline code: checksum's compiled code calls a builtin in a libnode without
    # symbols, which calls a named runtime function; a handler calls checksum
    libnode = "/usr/lib/x86_64-linux-gnu/libnode.so.108"
    checksum, handler, builtin = address(0x2000), address(0x2100), address(0x55AA)
    costs = {
        (JIT, checksum): 100,
        (JIT, handler): 7,
        (libnode, builtin): 900,
        (libnode, "v8::internal::Runtime_Add"): 40,
    }
    calls = {
        ((JIT, handler), (JIT, checksum)): (1, 1040),
        ((JIT, checksum), (libnode, builtin)): (30, 940),
        ((libnode, builtin), (libnode, "v8::internal::Runtime_Add")): (3, 40),
    }  # fmt: skip
    window = window_of(Profile([part(costs, calls)]), 1, maps={7: MAP})
    mine = ("app.js", "checksum")
    assert window.own[mine] == 100 + 900  # itself and the builtin held under it
    assert window.exclusive[("libnode.so.108", "checksum (app.js) > [unknown]")] == 900
    assert window.own[("app.js:26", "(anonymous)")] == 7
    assert window.inclusive[mine] == 1040  # from the arcs: no cycle through it
    assert ("libnode.so.108", "v8::internal::Runtime_Add") not in {
        f for (source, f) in window.own_by if source == mine
    }  # a named runtime function is not held: not its own without the stacks
