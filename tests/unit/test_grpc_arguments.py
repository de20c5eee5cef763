"""webperf.grpc's arguments, checked at the call: a call is an entry of a mix named by its
method, its message framed, its metadata lower-cased; a wrong value is one OptionError
line; webperf.grpc_message builds a message from a .proto and a dict (grpcio-tools)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture.grpc import grpc_message, grpc_mix, grpc_request
from pytest_webperf.fixture.http import http_name
from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm import grpcwire


def test_a_call_is_a_framed_post_named_by_its_method() -> None:
    call = grpc_request(
        "/users.Users/GetUser",
        message=b"\x08\x07",
        metadata={"Authorization": "Bearer x"},
        deadline="250ms",
        weight=3,
    )
    assert (call.path, call.method, call.name, call.weight, call.grpc) == (
        "/users.Users/GetUser",
        "POST",
        "GetUser",
        3.0,
        True,
    )
    assert grpcwire.decode_all(call.body)[0].data == b"\x08\x07"
    assert dict(call.headers) == {
        "content-type": "application/grpc",
        "te": "trailers",
        "grpc-timeout": "250m",
        "authorization": "Bearer x",
    }


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"method": "Echo"}, "a gRPC method is '/package.Service/Method'"),
        ({"message": "text"}, "the serialised request message, bytes"),
        ({"weight": 0}, "a weight is a number > 0"),
        ({"deadline": "soon"}, "deadline='soon'): a duration > 0"),
        ({"metadata": {"grpc-status": "0"}}, "not grpc-\\* or a pseudo-header"),
        ({"metadata": {"a": 1}}, "metadata is a dict of str names to str values"),
    ],
)
def test_a_wrong_argument_is_one_line_naming_it(kwargs: dict[str, Any], said: str) -> None:
    args = {"method": "/echo.Echo/Echo", **kwargs}
    with pytest.raises(OptionError, match=said.replace("(", r"\(").replace(")", r"\)")):
        grpc_request(args.pop("method"), **args)


def mix_of(**kwargs: Any) -> Any:
    args = {"message": b"", "metadata": None, "deadline": None, "expect_body": None}
    return grpc_mix(**{"method": None, "mix": None, **args, **kwargs})


def test_one_method_is_a_mix_of_one_and_several_keep_their_names() -> None:
    (one,) = mix_of(method="/echo.Echo/Echo", message=b"hi", expect_body=b"hi")
    assert one.name == "Echo" and one.expect_body == b"hi"
    two = mix_of(
        mix=[grpc_request("/a.S/Get", weight=3), grpc_request("/a.S/List")], expect_body="ok"
    )
    assert [e.name for e in two] == ["Get", "List"] and all(e.expect_body == b"ok" for e in two)
    workload = Workload(mix=tuple(two), http2=True, streams=10)
    assert http_name(workload) == "gRPC mix of 2 (Get 3, List 1) (10 streams)"
    assert http_name(Workload(mix=(one,), http2=True)) == "gRPC /echo.Echo/Echo"


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({}, "the method to call"),
        ({"mix": [grpc_request("/a.S/Get"), grpc_request("/b.S/Get")]}, "2 calls named 'Get'"),
        ({"mix": [grpc_request("/a.S/Get")], "method": "/a.S/Get"}, "not with method="),
        ({"mix": ["/a.S/Get"]}, "is not a webperf.grpc_request"),
    ],
)
def test_a_wrong_mix_is_one_line(kwargs: dict[str, Any], said: str) -> None:
    with pytest.raises(OptionError, match=said):
        mix_of(**kwargs)


PROTO = """
syntax = "proto3";
package users;
message GetUserRequest { int64 id = 1; string fields = 2; }
"""


def test_a_message_from_a_proto_and_a_dict(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools is the dev extra's")
    proto = tmp_path / "users.proto"
    proto.write_text(PROTO)
    data = grpc_message(proto, "users.GetUserRequest", {"id": 7, "fields": "name"})
    assert data == b"\x08\x07\x12\x04name"
    with pytest.raises(OptionError, match=r"no message users.Nope in users.proto \(it has: "):
        grpc_message(proto, "users.Nope", {})
    with pytest.raises(OptionError, match=r"no such \.proto file"):
        grpc_message(tmp_path / "missing.proto", "users.GetUserRequest", {})
    with pytest.raises(OptionError, match="Message type"):
        grpc_message(proto, "users.GetUserRequest", {"nope": 1})
