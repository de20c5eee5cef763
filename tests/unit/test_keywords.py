"""One word per idea in the fixture: ``concurrency=`` is the number of users or
connections in every call, and a keyword a call does not take is one ``OptionError`` line
naming the nearest it does (never Python's ``TypeError``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_arguments import _Target
from test_arguments import handle as a_handle

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture.handle import Webperf
from pytest_webperf.fixture.keywords import accepted, nearest


def handle() -> tuple[Webperf, list[tuple[str, int]]]:
    """A handle whose measurer records what it was asked to measure instead."""
    webperf = a_handle()
    asked: list[tuple[str, int]] = []

    def measure(target: Any, kind: Any, plan: Any, name: str, workload: Any, **_: Any) -> None:
        asked.append((name, plan.concurrency))

    webperf._measurer.measure = measure  # type: ignore[method-assign]
    return webperf, asked


# each call with its required arguments, by the call's name
CALLS: dict[str, tuple[Any, ...]] = {
    "http": (_Target(), "/hello"),
    "grpc": (_Target(), "/pkg.Items/GetItem"),
    "websocket": (_Target(), "/ws"),
    "sse": (_Target(), "/events"),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_every_call_takes_concurrency(call: str) -> None:
    webperf, asked = handle()
    getattr(webperf, call)(*CALLS[call], concurrency=7)
    assert len(asked) == 1 and asked[0][1] == 7, asked


@pytest.mark.parametrize(
    "call", ["http", "grpc", "locust", "mqtt", "websocket", "sse", "staged", "requests_lasting"]
)
def test_every_load_names_its_users_concurrency(call: str) -> None:
    webperf, _ = handle()
    names = accepted(getattr(webperf, call))
    assert "concurrency" in names and "users" not in names, names


MISSPELT = [
    ("http", CALLS["http"], {"concurency": 4}, "concurrency="),
    ("grpc", CALLS["grpc"], {"users": 4}, "concurrency="),
    ("websocket", CALLS["websocket"], {"users": 4}, "concurrency="),
    ("sse", CALLS["sse"], {"streams": 4}, "concurrency="),
    ("http", CALLS["http"], {"duraton": "2s"}, "duration="),
    ("grpc", CALLS["grpc"], {"mesage": b""}, "message="),
    ("websocket", CALLS["websocket"], {"intervall": "1s"}, "interval="),
    ("sse", CALLS["sse"], {"reconnect_evry": 3}, "reconnect_every="),
    ("locust", (_Target(), "locustfile.py"), {"users": 4}, "concurrency="),
    ("mqtt", (_Target(),), {"quos": 1}, "qos="),
    ("process", (["python", "app.py"],), {"helth": "/ok"}, "health="),
    ("server", ("nginx",), {"cpu": 1}, "cpus="),
    ("capacity", (_Target(), "/"), {"SLO": "p99<10ms"}, "slo="),
    ("staged", (_Target(), "/"), {"stage": []}, "stages="),
    ("request", ("/a",), {"wieght": 2}, "weight="),
    ("grpc_request", ("/p.S/M",), {"metdata": {}}, "metadata="),
]


@pytest.mark.parametrize(("call", "args", "keywords", "meant"), MISSPELT)
def test_a_misspelt_keyword_is_one_line_naming_the_nearest(
    call: str, args: tuple[Any, ...], keywords: dict[str, Any], meant: str
) -> None:
    webperf, asked = handle()
    with pytest.raises(OptionError) as caught:
        getattr(webperf, call)(*args, **keywords)
    text = str(caught.value)
    (word,) = keywords
    assert "\n" not in text
    assert text.startswith(f"webperf.{call}({word}=")
    assert f"did you mean {meant}?" in text
    assert not asked


def test_a_keyword_nothing_resembles_lists_what_the_call_takes() -> None:
    webperf, _ = handle()
    with pytest.raises(OptionError, match=r"no keyword zzz; it takes target=, path=, "):
        webperf.sse(_Target(), zzz=1)


def test_a_missing_or_extra_argument_is_one_line_too() -> None:
    webperf, _ = handle()
    with pytest.raises(OptionError, match=r"^webperf\.http\(\): missing a required argument"):
        webperf.http()  # type: ignore[call-arg]
    with pytest.raises(OptionError, match=r"^webperf\.sse\(\): too many positional"):
        webperf.sse(_Target(), "/events", 4)  # type: ignore[misc]


@given(st.sampled_from(accepted(Webperf.http)))
def test_every_accepted_keyword_is_its_own_nearest(word: str) -> None:
    assert nearest(word, accepted(Webperf.http)) == word
    assert nearest(word.upper(), accepted(Webperf.http)) == word
