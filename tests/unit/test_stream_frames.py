"""WebSocket frames: the reference codec (``longlived/frame.py``) on RFC 6455's own examples
and properties, and the native engine's own frame reader and writer (``native/ws.c``)
against it on the same bytes, cut anywhere: fragmented messages with control frames
between their fragments, masking, lengths at 125/126/65535/65536 bytes (hypothesis)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.longlived import frame as wf
from pytest_webperf.longlived.frame import (
    Assembler,
    Frame,
    FrameDecoder,
    Message,
    Opcode,
    ProtocolError,
)
from pytest_webperf.swarm import streamloop
from pytest_webperf.swarm.engine import ENGINE

built = pytest.mark.skipif(streamloop.unavailable() is not None, reason="stream loop not built")
KEYS = st.binary(min_size=4, max_size=4)
# the length forms' boundaries most often, others too
LENGTHS = st.one_of(st.sampled_from([0, 1, 125, 126, 127, 65535, 65536]), st.integers(0, 3000))
KEEP = 40  # the loop keeps a message's first 40 bytes (its correlation header)

# ---------------------------------------------------------------- RFC 6455's examples


def test_rfc_examples() -> None:
    assert wf.encode(Frame(Opcode.TEXT, b"Hello")) == bytes.fromhex("810548656c6c6f")
    masked = wf.encode(Frame(Opcode.TEXT, b"Hello"), bytes.fromhex("37fa213d"))
    assert masked == bytes.fromhex("818537fa213d7f9f4d5158")
    first, last = wf.fragment(Opcode.TEXT, b"Hello", [3])
    assert wf.encode(first) == bytes.fromhex("010348656c")
    assert wf.encode(last) == bytes.fromhex("80026c6f")
    assert wf.encode(Frame(Opcode.BINARY, bytes(256)))[:4] == bytes.fromhex("827e0100")
    long = wf.encode(Frame(Opcode.BINARY, bytes(65536)))
    assert long[:10] == bytes.fromhex("827f0000000000010000")


def test_accept_key_rfc_example() -> None:
    assert wf.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@built
@given(st.binary(min_size=16, max_size=16))
def test_the_loops_accept_key_is_the_references(raw: bytes) -> None:
    import base64

    key = base64.b64encode(raw).decode()
    assert ENGINE.module.ws_accept(key) == wf.accept_key(key)


@pytest.mark.parametrize(
    ("length", "header"), [(0, 2), (125, 2), (126, 4), (65535, 4), (65536, 10), (70000, 10)]
)
def test_length_forms(length: int, header: int) -> None:
    data = wf.encode(Frame(Opcode.BINARY, bytes(length)))
    assert len(data) == header + length == wf.header_size(length, masked=False) + length
    masked = wf.encode(Frame(Opcode.BINARY, bytes(length)), b"\1\2\3\4")
    assert len(masked) == header + 4 + length
    (got,) = FrameDecoder(masked=True).feed(masked)
    assert got.payload == bytes(length)


# ---------------------------------------------------------------- the reference's properties


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    opcode = draw(st.sampled_from(list(Opcode)))
    if opcode >= 8:
        return Frame(opcode, draw(st.binary(max_size=125)))
    n = draw(LENGTHS)
    block = draw(st.binary(min_size=1, max_size=64))  # repeated to n bytes: cheap to draw
    return Frame(opcode, (block * (n // len(block) + 1))[:n], fin=draw(st.booleans()))


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` split at the given offsets (any; sorted and deduplicated here)."""
    at = sorted({p % (len(data) + 1) for p in points})
    edges = [0, *at, len(data)]
    return [data[a:b] for a, b in pairwise(edges)]


@settings(max_examples=200)
@given(
    st.lists(frames(), min_size=1, max_size=6),
    st.one_of(st.none(), KEYS),
    st.lists(st.integers(0, 1 << 20), max_size=12),
)
def test_decode_any_split_gives_the_frames(
    sent: list[Frame], key: bytes | None, points: list[int]
) -> None:
    wire = b"".join(wf.encode(f, key) for f in sent)
    decoder = FrameDecoder(masked=key is not None)
    got: list[Frame] = []
    for piece in cut(wire, points):
        got.extend(decoder.feed(piece))
    assert got == sent


@given(st.binary(max_size=2000), KEYS)
def test_mask_is_its_own_inverse(payload: bytes, key: bytes) -> None:
    once = wf.mask(payload, key)
    assert wf.mask(once, key) == payload
    assert once == bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@st.composite
def fragmented(draw: st.DrawFn) -> tuple[list[Message], list[Frame]]:
    """Messages as fragments of drawn sizes, with pings and pongs between fragments."""
    messages, sent = [], []
    for _ in range(draw(st.integers(1, 3))):
        opcode = draw(st.sampled_from([Opcode.TEXT, Opcode.BINARY]))
        n = draw(LENGTHS)
        block = draw(st.binary(min_size=1, max_size=64))
        payload = (block * (n // len(block) + 1))[:n]
        if opcode == Opcode.TEXT:
            payload = payload.hex()[:n].encode()
        sizes = draw(st.lists(st.integers(1, 70000), max_size=6))
        for part in wf.fragment(opcode, payload, sizes):
            sent.append(part)
            if draw(st.booleans()):
                control = draw(st.sampled_from([Opcode.PING, Opcode.PONG]))
                sent.append(Frame(control, draw(st.binary(max_size=125))))
        messages.append(Message(opcode, payload))
    return messages, sent


@given(fragmented(), st.lists(st.integers(0, 1 << 17), max_size=8))
def test_reassembly_with_interleaved_control_frames(
    case: tuple[list[Message], list[Frame]], points: list[int]
) -> None:
    messages, sent = case
    wire = b"".join(wf.encode(f, b"abcd") for f in sent)
    decoder, assembler = FrameDecoder(masked=True), Assembler()
    got, controls = [], []
    for piece in cut(wire, points):
        for part in decoder.feed(piece):
            out = assembler.add(part)
            if isinstance(out, Message):
                got.append(out)
            elif isinstance(out, Frame):
                controls.append(out)
    assert got == messages
    assert controls == [f for f in sent if f.is_control]


@given(st.integers(1000, 4999), st.text(max_size=40))
def test_close_payload_round_trip(code: int, reason: str) -> None:
    payload = wf.close_payload(code, reason) if len(reason.encode()) <= 123 else b""
    if payload:
        assert wf.parse_close(payload) == (code, reason)


def test_close_empty_and_short() -> None:
    assert wf.parse_close(b"") == (1005, "")
    with pytest.raises(ProtocolError):
        wf.parse_close(b"\x03")


# ---------------------------------------------------------------- the loop's reader


def expected_events(sent: list[Frame]) -> list[tuple[object, ...]]:
    """What the loop's reader must report for these (server, unmasked) frames: each
    control frame as it comes, each message when its last fragment does, with its
    length and first 40 bytes."""
    events: list[tuple[object, ...]] = []
    assembler = Assembler()
    for part in sent:
        out = assembler.add(part)
        if isinstance(out, Frame):
            events.append(("control", out.opcode, out.payload))
        elif isinstance(out, Message):
            events.append(("message", out.opcode, len(out.payload), out.payload[:KEEP]))
    return events


@built
@settings(max_examples=300)
@given(fragmented(), st.lists(st.integers(0, 1 << 17), max_size=10))
def test_the_loops_reader_agrees_with_the_reference_cut_anywhere(
    case: tuple[list[Message], list[Frame]], points: list[int]
) -> None:
    _, sent = case
    wire = b"".join(wf.encode(f) for f in sent)  # a server's frames: not masked
    got = ENGINE.module.ws_parse(cut(wire, points), KEEP)
    assert got == expected_events(sent)


@built
@given(fragmented())
def test_the_loops_reader_byte_at_a_time(case: tuple[list[Message], list[Frame]]) -> None:
    _, sent = case
    wire = b"".join(wf.encode(f) for f in sent)
    if len(wire) > 5000:
        return  # a byte per call: the long forms are covered by the cuts above
    pieces = [wire[i : i + 1] for i in range(len(wire))]
    assert ENGINE.module.ws_parse(pieces, KEEP) == expected_events(sent)


@built
@pytest.mark.parametrize("length", [0, 1, 125, 126, 65535, 65536, 70000])
@pytest.mark.parametrize("opcode", [Opcode.TEXT, Opcode.BINARY, Opcode.PING])
def test_the_loop_writes_what_the_reference_encodes(length: int, opcode: int) -> None:
    if opcode >= 8 and length > 125:
        return
    payload = bytes(range(256)) * (length // 256 + 1)
    payload = payload[:length]
    key = b"\x37\xfa\x21\x3d"
    written = ENGINE.module.ws_frame(opcode, payload, key)
    assert written == wf.encode(Frame(opcode, payload), key)  # masked as a client must
    (decoded,) = FrameDecoder(masked=True).feed(written)
    assert decoded.payload == payload


@built
@given(st.binary(max_size=300), KEYS, st.booleans())
def test_the_loop_masks_any_payload(payload: bytes, key: bytes, fin: bool) -> None:
    written = ENGINE.module.ws_frame(2, payload, key, fin)
    assert written == wf.encode(Frame(Opcode.BINARY, payload, fin=fin), key)


# ---------------------------------------------------------------- what a client refuses

REFUSED = [
    (bytes([0x81, 0x80]) + b"abcd", "masked", 1),  # a masked frame from a server
    (bytes([0xC1, 0x00]), "reserved", 2),  # RSV1 with no extension offered
    (bytes([0x83, 0x00]), "opcode", 3),  # opcode 3
    (bytes([0x89, 0x7E, 0x00, 0x7E]) + bytes(126), "control", 4),  # a ping of 126 bytes
    (bytes([0x09, 0x00]), "control", 5),  # a fragmented ping
    (bytes([0x82, 0x7F, 0x80]) + bytes(7), "top bit", 8),  # a 64-bit length, top bit set
]


@pytest.mark.parametrize(("wire", "words", "code"), REFUSED)
def test_both_readers_refuse(wire: bytes, words: str, code: int) -> None:
    with pytest.raises(ProtocolError, match=words):
        FrameDecoder(masked=False).feed(wire)
    if streamloop.unavailable() is None:
        assert ENGINE.module.ws_parse([wire]) == [("error", code)]


@built
def test_the_loop_refuses_orphans_and_interleaving() -> None:
    parse = ENGINE.module.ws_parse
    assert parse([bytes([0x80, 0x01]) + b"x"]) == [("error", 6)]  # a continuation first
    assert parse([bytes([0x01, 0x01]) + b"a" + bytes([0x82, 0x01]) + b"b"]) == [("error", 7)]
