"""gRPC on the wire: framing round trips whatever the split (hypothesis), a cut message is
refused, the status words are gRPC's names, and the health messages' few protobuf bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.swarm import grpcwire
from pytest_webperf.swarm.grpcwire import Decoder, FramingError, Message

messages = st.lists(st.tuples(st.binary(max_size=300), st.booleans()), max_size=8)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return pieces


@given(messages, st.lists(st.integers(min_value=0), max_size=20))
def test_any_split_of_the_stream_gives_the_messages_back(
    items: list[tuple[bytes, bool]], cuts: list[int]
) -> None:
    wire = b"".join(grpcwire.encode(data, compressed=c) for data, c in items)
    decoder = Decoder()
    got: list[Message] = []
    for piece in split(wire, cuts):
        got += decoder.feed(piece)
    decoder.close()
    assert got == [Message(data, c) for data, c in items]
    assert decoder.pending == 0


@given(messages)
def test_decode_all_is_the_inverse_of_encode(items: list[tuple[bytes, bool]]) -> None:
    wire = b"".join(grpcwire.encode(data, compressed=c) for data, c in items)
    assert grpcwire.decode_all(wire) == [Message(data, c) for data, c in items]


@given(st.binary(min_size=1, max_size=200), st.data())
def test_a_body_cut_inside_a_message_is_a_framing_error(data: bytes, draw: st.DataObject) -> None:
    wire = grpcwire.encode(data)
    cut = draw.draw(st.integers(min_value=1, max_value=len(wire) - 1))
    with pytest.raises(FramingError, match="inside a message"):
        grpcwire.decode_all(wire[:cut])


def test_the_prefix_is_a_flag_then_a_big_endian_length() -> None:
    assert grpcwire.encode(b"hi") == b"\x00\x00\x00\x00\x02hi"
    assert grpcwire.encode(b"", compressed=True) == b"\x01\x00\x00\x00\x00"
    assert grpcwire.encode(b"x" * 258)[:5] == b"\x00\x00\x00\x01\x02"


def test_a_bad_flag_or_an_oversized_message_is_refused_at_once() -> None:
    with pytest.raises(FramingError, match="flag 2"):
        Decoder().feed(b"\x02\x00\x00\x00\x00")
    with pytest.raises(FramingError, match="over the 10-byte limit"):
        Decoder(max_message=10).feed(b"\x00\x00\x00\x00\x0b")  # before its body came


@given(st.integers(min_value=1, max_value=16))
def test_a_non_ok_status_is_grpc_and_its_name_as_grpc_spells_it(code: int) -> None:
    kind = grpcwire.error_kind(code)
    assert kind == "grpc_" + grpcwire.CODE_NAMES[code]
    assert kind[5:].isupper()


def test_status_and_message_headers() -> None:
    assert grpcwire.error_kind(14) == "grpc_UNAVAILABLE"
    assert grpcwire.error_kind(99) == "grpc_CODE_99"
    assert grpcwire.parse_status("14") == 14
    assert grpcwire.parse_status(None) == grpcwire.UNKNOWN
    assert grpcwire.parse_status(b"x") == grpcwire.UNKNOWN
    assert grpcwire.decode_message("caf%C3%A9 %25 done") == "café % done"


def test_a_unary_calls_headers_and_its_method() -> None:
    headers = dict(grpcwire.request_headers("/echo.Echo/Echo", (("X-Key", "v"),), timeout_s=2.5))
    assert headers == {
        "content-type": "application/grpc",
        "te": "trailers",
        "grpc-timeout": "2500m",
        "x-key": "v",
    }
    assert grpcwire.method_name("/pkg.Users/GetUser") == "GetUser"
    for bad in ("echo.Echo/Echo", "/echo.Echo", "/a/b/c", "/ a/b", 7):
        with pytest.raises(ValueError, match=r"/package\.Service/Method"):
            grpcwire.parse_method(bad)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz.", max_size=300))
def test_a_health_request_names_its_service(service: str) -> None:
    raw = grpcwire.health_request(service)
    if not service:
        assert raw == b""
        return
    assert raw[0] == 0x0A and raw.endswith(service.encode())


def test_a_health_response_is_read_past_unknown_fields() -> None:
    assert grpcwire.health_status(b"\x08\x01") == grpcwire.SERVING
    assert grpcwire.health_status(b"") == 0  # proto3: absent is UNKNOWN
    assert grpcwire.health_status(b"\x12\x03abc\x08\x02\x1d\x00\x00\x00\x00") == 2
    with pytest.raises(FramingError):
        grpcwire.health_status(b"\x08")
