"""What a counted start needs of a target: its runtime read from its command (names, a Go
binary's ELF sections), the pinning that runtime gets (the JVM refused), a launcher script
named, the wrapped command (``{dir}``, flags after the program, ASLR off), a catalogue
server's ``[count]`` table, and a local command relaunched under a wrap and back."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import pytest

from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.catalog import load_spec
from pytest_webperf.targets.images import counted_layer
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.targets.runtime import (
    JVM_REFUSED,
    PINNINGS,
    elf_sections,
    launcher,
    pinned_argv,
    runtime_of,
)
from pytest_webperf.targets.wrap import DIR, Wrap, Wrappable, on_host


def fake_elf(path: Path, sections: list[str]) -> Path:
    """A minimal 64-bit little-endian ELF file whose section header table names
    ``sections`` (and nothing else is in it)."""
    names = b"\0" + b"".join(s.encode() + b"\0" for s in [*sections, ".shstrtab"])
    entsize, count = 64, len(sections) + 2  # the null section, the given ones, .shstrtab
    strtab_offset = 64
    shoff = strtab_offset + len(names)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack(
        "<HHIQQQIHHHHHH", 2, 62, 1, 0, 0, shoff, 0, 64, 0, 0, entsize, count, count - 1
    )
    table = bytes(entsize)  # the null section
    offset = 1
    for name in [*sections, ".shstrtab"]:
        data_offset = strtab_offset if name == ".shstrtab" else 0
        size = len(names) if name == ".shstrtab" else 0
        table += struct.pack("<IIQQQQIIQQ", offset, 1, 0, 0, data_offset, size, 0, 0, 1, 0)
        offset += len(name) + 1
    path.write_bytes(header + names + table)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("argv", "runtime"),
    [
        (["python3", "app.py"], "python"),
        (["/usr/bin/python3.11", "-m", "app"], "python"),
        (["gunicorn", "app:app"], "python"),
        (["node", "app.js"], "node"),
        (["java", "-jar", "app.jar"], "jvm"),
        (["/no/such/server"], "native"),
    ],
)
def test_the_runtime_is_read_from_the_programs_name(argv: list[str], runtime: str) -> None:
    assert runtime_of(argv) == runtime


def test_a_go_binary_is_known_by_its_sections(tmp_path: Path) -> None:
    go = fake_elf(tmp_path / "server", [".text", ".note.go.buildid", ".go.buildinfo"])
    c = fake_elf(tmp_path / "cserver", [".text", ".data"])
    assert ".go.buildinfo" in elf_sections(go)
    assert runtime_of([str(go)]) == "go" and runtime_of([str(c)]) == "native"
    assert runtime_of([str(go)], look=False) == "native"  # a container's: not on this host
    assert ".text" in elf_sections(Path(os.path.realpath(sys.executable)))
    assert elf_sections(tmp_path) == set()  # not a file


def test_each_runtime_gets_its_pinning_and_the_jvm_is_refused() -> None:
    assert PINNINGS["python"].env == {"PYTHONHASHSEED": "0"}
    assert PINNINGS["go"].env["GODEBUG"] == "asyncpreemptoff=1"
    assert PINNINGS["node"].smc_check == "all-non-file"
    assert PINNINGS["jvm"].refused == JVM_REFUSED and "timed checks" in JVM_REFUSED
    assert PINNINGS["python"].applied({"PYTHONHASHSEED": "7"}) == {"PYTHONHASHSEED": "7"}
    # what names the functions, in the counted window only (the native one counts writes)
    assert PINNINGS["python"].named().env == {"PYTHONHASHSEED": "0", "PYTHONPERFSUPPORT": "1"}
    assert PINNINGS["node"].named().flags[-1] == "--perf-basic-prof"
    assert "--perf-basic-prof" not in PINNINGS["node"].flags
    assert PINNINGS["node"].named().named() == PINNINGS["node"].named()
    assert pinned_argv(["node", "--predictable", "app.js"], PINNINGS["node"]) == [
        "node",
        "--single-threaded",
        "--no-opt",
        "--always-sparkplug",
        "--predictable",
        "app.js",
    ]


def test_a_launcher_script_is_named(tmp_path: Path) -> None:
    shim = tmp_path / "python3"
    shim.write_text('#!/usr/bin/env bash\nexec real-python "$@"\n')
    shim.chmod(0o755)
    why = launcher([str(shim), "app.py"])
    assert why is not None and "#!/usr/bin/env bash" in why and "under callgrind" in why
    assert launcher([os.path.realpath(sys.executable)]) is None


def test_a_wrapped_command() -> None:
    wrap = Wrap(PINNINGS["node"], prefix=("valgrind", f"--out={DIR}/x"), directory="/tmp/w")
    argv = wrap.argv(["node", "app.js"], "/seen")
    assert argv[:2] == ["setarch", os.uname().machine] and argv[2] == "-R"
    assert argv[3:] == [
        "valgrind",
        "--out=/seen/x",
        "node",
        "--predictable",
        "--single-threaded",
        "--no-opt",
        "--always-sparkplug",
        "app.js",
    ]
    assert wrap.argv(["node"], "/seen", aslr=False)[0] == "valgrind"


def test_a_command_runs_beside_and_is_bounded() -> None:
    assert on_host(["sh", "-c", "echo hi; exit 3"], 10) == (3, "hi\n")
    with pytest.raises(TimeoutError):
        on_host(["sleep", "5"], 0.2)


def write_toml(tmp_path: Path, table: str) -> Path:
    directory = tmp_path / "srv"
    directory.mkdir(exist_ok=True)
    (directory / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (directory / "server.toml").write_text(f'name = "srv"\n{table}')
    return directory


def test_a_catalogue_servers_counted_start(tmp_path: Path) -> None:
    spec = load_spec(
        write_toml(tmp_path, '[count]\nruntime = "go"\ncommand = ["/srv"]\nenv = { A = 1 }\n')
    )
    assert spec.count is not None
    assert (spec.count.runtime, spec.count.command, spec.count.env) == ("go", ("/srv",), {"A": "1"})
    assert load_spec(write_toml(tmp_path, "")).count is None
    debug = load_spec(write_toml(tmp_path, '[count]\ndebug_symbols = ["zlib1g", "libssl3"]\n'))
    assert debug.count is not None and debug.count.debug_symbols == ("zlib1g", "libssl3")


def test_the_counted_layer_installs_the_debug_symbols_asked_for() -> None:
    plain = counted_layer("webperf/nginx:1", "www")
    assert "valgrind" in plain and "dbgsym" not in plain and plain.endswith("USER www\n")
    layer = counted_layer("webperf/nginx:1", "", ["zlib1g", "libssl3", "zlib1g"])
    assert "install -y --no-install-recommends libssl3-dbgsym zlib1g-dbgsym" in layer
    assert "debian-debug $VERSION_CODENAME-debug main" in layer


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ('[count]\nruntime = "cobol"\n', "runtime = 'cobol': one of native, python"),
        ("[count]\nrefuses = 'x'\n", "[count] takes runtime, command, env, refuse, debug"),
        ('[count]\nrefuse = ""\n', "refuse is one line"),
        ("[count]\ncommand = 'nginx'\n", "'count.command' must be a list of strings"),
        ("[count]\nenv = 3\n", "[count] env must be a table"),
        ('[count]\ndebug_symbols = ["zlib1g-dbgsym x"]\n', "Debian package names"),
        ('[count]\ndebug_symbols = "zlib1g"\n', "must be a list of strings"),
    ],
)
def test_a_wrong_count_table_names_the_file_and_the_key(
    tmp_path: Path, table: str, error: str
) -> None:
    with pytest.raises(CatalogError, match=error.replace("[", r"\[").replace("(", r"\(")):
        load_spec(write_toml(tmp_path, table))


SERVER = """
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ.get("PYTHONHASHSEED", "unset").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""


def test_a_local_command_is_relaunched_under_a_wrap_and_back(tmp_path: Path) -> None:
    import urllib.request

    script = tmp_path / "server.py"
    script.write_text(SERVER)
    target = ProcessTarget([sys.executable, str(script)], name="py", health="/")
    assert isinstance(target, Wrappable)
    assert target.pinning().runtime == "python"
    with target:
        first = target.process.pid if target.process else 0

        def seen() -> str:
            return urllib.request.urlopen(target.url + "/", timeout=10).read().decode()

        assert seen() == os.environ.get("PYTHONHASHSEED", "unset")
        target.relaunch(Wrap(target.pinning(), aslr_off=False))
        assert seen() == "0" and target.process is not None and target.process.pid != first
        target.restart()  # as given again
        assert seen() == os.environ.get("PYTHONHASHSEED", "unset")
        assert target.seen("/x") == "/x"
