"""A user's own Locust users: how a spec names them, what ``webperf.locust`` accepts, and
the check that imports a locustfile in a child Python before anything starts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.swarm.userspec import (
    UserSpec,
    check,
    class_names,
    file_spec,
    is_custom,
    label,
    locustfile_path,
    parse_user_spec,
)

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
paths = st.lists(st.from_regex(r"[a-z0-9_.:-]{1,8}", fullmatch=True), min_size=1, max_size=4)


@given(paths, st.lists(identifiers, max_size=3))
def test_a_file_spec_round_trips(parts: list[str], classes: list[str]) -> None:
    path = "/" + "/".join(parts) + ".py"
    parsed = parse_user_spec(file_spec(path, classes))
    assert parsed == UserSpec(path, "", tuple(classes))


def test_module_specs_and_built_in_users() -> None:
    assert parse_user_spec("shop_users:Shop") == UserSpec(None, "shop_users", ("Shop",))
    assert all(not is_custom(u) for u in ("native", "lean", "fast", "mqtt", "auto"))
    assert is_custom("shop_users:Shop") and is_custom("file:/x.py")
    with pytest.raises(ValueError, match="neither module:Class nor file:"):
        parse_user_spec("shop_users")


def test_labels_name_what_ran() -> None:
    assert label("file:/a/b/locustfile.py", ("Shop", "Admin")) == "locustfile.py: Shop, Admin"
    assert label("file:/a/b/locustfile.py:Shop") == "locustfile.py: Shop"
    assert label("file:/a/b/locustfile.py") == "locustfile.py"
    assert label("shop_users:Shop") == "shop_users:Shop"


@pytest.mark.parametrize(
    ("given_", "expected"),
    [(None, ()), ("Shop", ("Shop",)), (["Shop", "Admin", "Shop"], ("Shop", "Admin"))],
)
def test_class_names(given_: object, expected: tuple[str, ...]) -> None:
    assert class_names(given_) == expected


@pytest.mark.parametrize("bad", ["", "my.Shop", 3, [], ["Shop", 1], {"Shop": 1}])
def test_class_names_refused_in_one_line(bad: object) -> None:
    with pytest.raises(OptionError, match=r"^user_class=.*: the name of a User class"):
        class_names(bad)


def test_locustfile_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locustfile.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert locustfile_path("locustfile.py") == tmp_path / "locustfile.py"
    assert locustfile_path(tmp_path / "locustfile.py") == tmp_path / "locustfile.py"
    with pytest.raises(OptionError, match=r"^locustfile='missing.py': no such file"):
        locustfile_path("missing.py")
    with pytest.raises(OptionError, match=r"^locustfile='notes.txt': not a .py file"):
        locustfile_path("notes.txt")
    with pytest.raises(OptionError, match=r"^locustfile=3: the path of a locustfile"):
        locustfile_path(3)


def write(tmp_path: Path, text: str, name: str = "locustfile.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


SHOP = """
from locust import FastHttpUser, HttpUser, User, constant_pacing, constant_throughput, task


class Base(HttpUser):
    abstract = True


class Shop(Base):
    wait_time = constant_pacing(0.5)

    @task
    def browse(self):
        self.client.get("/")


class Admin(FastHttpUser):
    host = "http://example.com"
    wait_time = constant_throughput(4)

    @task
    def audit(self):
        self.client.get("/admin")


class Idle(User):
    @task
    def nothing(self):
        pass
"""


def test_check_finds_every_runnable_user_class_and_its_pacing(tmp_path: Path) -> None:
    path = write(tmp_path, SHOP)
    found = check(file_spec(path))
    assert found.classes == ("Shop", "Admin", "Idle")  # not the abstract Base, nor imports
    assert found.pacing_s == {"Shop": 0.5, "Admin": 0.25, "Idle": None}
    assert found.hosts["Admin"] == "http://example.com" and found.hosts["Shop"] is None
    assert check(file_spec(path, ["Admin"])).classes == ("Admin",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            SHOP + "\nfrom locust import LoadTestShape\nclass Ramp(LoadTestShape):\n"
            "    def tick(self):\n        return None\n",
            r"locustfile .*locustfile.py has a LoadTestShape \(Ramp\): webperf sets the users",
        ),
        ("import no_such_module\n", r"does not import: ModuleNotFoundError: .*locustfile.py:1"),
        ("x = (\n", r"does not import: SyntaxError: .* \(locustfile.py:1\)"),
        ("X = 1\n\n\nraise RuntimeError('no')\n", r"RuntimeError: no \(locustfile.py:4\)"),
        ("from locust import HttpUser\n", r"has no User class"),
    ],
    ids=["shape", "import", "syntax", "raises", "no-user"],
)
def test_check_refuses_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(OptionError, match=message) as refused:
        check(file_spec(path))
    assert "\n" not in str(refused.value)


def test_check_names_the_classes_a_file_has(tmp_path: Path) -> None:
    path = write(tmp_path, SHOP)
    with pytest.raises(
        OptionError, match=r"^user_class=Nope: not a User class .*Admin, Idle, Shop"
    ):
        check(file_spec(path, ["Shop", "Nope"]))


def test_check_of_a_missing_file_or_module(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="no such file"):
        check(file_spec(tmp_path / "gone.py"))
    with pytest.raises(OptionError, match="importing 'no_such_users' failed: ModuleNotFoundError"):
        check("no_such_users:Shop")
