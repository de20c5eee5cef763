"""The MQTT 3.1.1 codec (tests and the fault broker use it): every packet survives a
round trip, remaining lengths use 1 to 4 bytes up to 268,435,455, and bytes that are
not a packet are refused with ``MalformedPacket``, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import mqtt_codec as codec
from tests.mqtt_codec import MalformedPacket, Packet, decode, encode

texts = st.text(max_size=40).filter(lambda t: len(t.encode()) <= 65535)
pids = st.integers(min_value=1, max_value=65535)


@given(st.integers(min_value=0, max_value=codec.MAX_REMAINING))
def test_a_varint_round_trips_in_one_to_four_bytes(n: int) -> None:
    raw = codec.encode_varint(n)
    assert codec.decode_varint(raw) == (n, len(raw))
    assert len(raw) == 1 + (n > 127) + (n > 16_383) + (n > 2_097_151)


@pytest.mark.parametrize(
    ("n", "raw"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_152, b"\x80\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_the_specifications_examples(n: int, raw: bytes) -> None:  # MQTT 3.1.1, table 2.4
    assert codec.encode_varint(n) == raw


@pytest.mark.parametrize("n", [-1, codec.MAX_REMAINING + 1])
def test_a_varint_out_of_range_is_refused(n: int) -> None:
    with pytest.raises(ValueError, match="remaining length"):
        codec.encode_varint(n)


def test_a_fifth_length_byte_or_a_padded_one_is_malformed() -> None:
    with pytest.raises(MalformedPacket, match="longer than 4"):
        codec.decode_varint(b"\xff\xff\xff\xff\x01")
    with pytest.raises(MalformedPacket, match="more bytes"):
        codec.decode_varint(b"\x80\x00")
    assert codec.decode_varint(b"\xff\xff") is None  # incomplete: wait for more


packets = st.one_of(
    st.builds(
        Packet,
        st.just(codec.CONNECT),
        client_id=texts,
        keepalive=st.integers(0, 65535),
        clean_session=st.booleans(),
    ),
    st.builds(
        Packet, st.just(codec.CONNACK), session_present=st.booleans(), return_code=st.integers(0, 5)
    ),
    st.builds(
        codec.publish,
        texts,
        st.binary(max_size=300),
        st.just(0),
    ),
    st.builds(
        codec.publish,
        texts,
        st.binary(max_size=300),
        st.integers(1, 2),
        pids,
        st.booleans(),
    ),
    st.builds(lambda k, i: Packet(k, codec.FLAGS.get(k, 0), i), st.sampled_from(codec.ACKS), pids),
    st.builds(
        lambda i, f: Packet(codec.SUBSCRIBE, 2, i, filters=tuple(f)),
        pids,
        st.lists(st.tuples(texts, st.integers(0, 2)), min_size=1, max_size=4),
    ),
    st.builds(
        lambda i, c: Packet(codec.SUBACK, 0, i, filters=tuple(("", x) for x in c)),
        pids,
        st.lists(st.sampled_from([0, 1, 2, 0x80]), min_size=1, max_size=4),
    ),
    st.builds(Packet, st.sampled_from([codec.PINGREQ, codec.PINGRESP, codec.DISCONNECT])),
)


@given(packets, st.binary(max_size=20))
def test_a_packet_round_trips_and_leaves_what_follows(packet: Packet, rest: bytes) -> None:
    raw = encode(packet)
    assert decode(raw + rest) == (packet, len(raw))
    for cut in range(len(raw)):  # any prefix: not yet a packet
        assert decode(raw[:cut]) is None


@given(st.binary(max_size=64))
def test_any_bytes_decode_or_are_refused_cleanly(data: bytes) -> None:
    try:
        found = decode(data)
    except MalformedPacket:
        return
    if found is not None:
        packet, used = found
        assert 0 < used <= len(data)
        assert decode(encode(packet)) is not None


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"\x00\x00", "reserved"),
        (b"\xf0\x00", "reserved"),
        (b"\x36\x05\x00\x01a\x00\x01", "QoS 3"),
        (b"\x32\x05\x00\x01a\x00\x00", "packet id 0"),
        (b"\x60\x02\x00\x01", "flags"),  # PUBREL must carry flags 0010
        (b"\x40\x03\x00\x01\x00", "2 bytes"),
        (b"\x20\x02\x02\x00", "CONNACK"),
        (b"\xc0\x01\x00", "no body"),
        (b"\x30\x03\x00\x05a", "ends early"),
        (b"\x10\x0c\x00\x04MQTX\x04\x02\x00\x3c\x00\x00", "not MQTT 4"),
        (b"\x30\x04\x00\x02\xff\xfe", "UTF-8"),
    ],
)
def test_malformed_packets_are_refused(raw: bytes, words: str) -> None:
    with pytest.raises(MalformedPacket, match=words):
        decode(raw)


def test_a_qos2_publish_is_what_the_specification_says() -> None:
    raw = encode(codec.publish("a/b", b"hi", qos=2, packet_id=10))
    assert raw == b"\x34\x09\x00\x03a/b\x00\x0ahi"
    assert encode(Packet(codec.PUBREL, packet_id=10)) == b"\x62\x02\x00\x0a"
