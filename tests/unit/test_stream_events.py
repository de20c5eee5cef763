"""Server-sent events: the reference parser (``longlived/events.py``) on the standard's rules
and properties, and the native engine's byte-at-a-time parser (``native/sse.c``) against
it on the same streams, cut anywhere, chunked or read until close (hypothesis)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.longlived.events import Event, SSEParser, encode_event
from pytest_webperf.swarm import streamloop
from pytest_webperf.swarm.engine import ENGINE

built = pytest.mark.skipif(streamloop.unavailable() is not None, reason="stream loop not built")


def parse(stream: bytes, pieces: list[int] | None = None) -> tuple[list[Event], SSEParser]:
    parser = SSEParser()
    events: list[Event] = []
    at = 0
    for size in pieces or [len(stream)]:
        events += parser.feed(stream[at : at + size])
        at += size
    events += parser.feed(stream[at:])
    events += parser.close()
    return events, parser


# ---------------------------------------------------------------- the standard's examples


def test_multi_line_data_and_comments() -> None:
    events, _ = parse(
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
        b"data:  third event\n\n"
    )
    assert events == [
        Event("first event", last_event_id="1"),
        Event("second event"),
        Event(" third event"),
    ]


def test_data_lines_join_and_blank_data() -> None:
    events, _ = parse(b"data\n\ndata\ndata\n\ndata:\n")  # the last: no blank line, dropped
    assert events == [Event(""), Event("\n")]


def test_event_type_retry_and_nul_id() -> None:
    events, parser = parse(
        b"retry: 2500\nevent: tick\nid: 7\ndata: a\n\nid: 8\0\ndata: b\n\nretry: x1\n\n"
    )
    assert events == [Event("a", "tick", "7"), Event("b", "message", "7")]
    assert parser.retry_ms == 2500


def test_a_leading_bom_is_dropped_once() -> None:
    assert parse("\ufeffdata: x\n\n".encode())[0] == [Event("x")]
    assert parse("\ufeff\ufeffdata: x\n\n".encode())[0] == []  # a second BOM: a field name


def test_restart_keeps_the_last_event_id() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: 5\ndata: x\n\n") == [Event("x", last_event_id="5")]
    parser.restart()
    assert parser.last_event_id == "5"
    assert parser.feed(b"data: y\n\n") == [Event("y")]  # the new stream's buffer is empty


# ---------------------------------------------------------------- properties

TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=40
)
EOLS = st.sampled_from(["\n", "\r\n", "\r"])
IDS = st.from_regex(r"[0-9a-z]{0,6}", fullmatch=True)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[Event]]:
    """An encoded stream (each event with its own line ends, comments, ids, types, and
    multi-byte UTF-8) and the events it must give."""
    parts, expected = [], []
    last_id = ""
    for _ in range(draw(st.integers(0, 6))):
        data = draw(TEXT)
        kind = draw(st.one_of(st.none(), st.from_regex(r"[a-z]{1,8}", fullmatch=True)))
        ident = draw(st.one_of(st.none(), IDS))
        comments = tuple(draw(st.lists(st.from_regex(r"[ -~]{0,10}", fullmatch=True), max_size=2)))
        parts.append(encode_event(data, event=kind, id=ident, eol=draw(EOLS), comments=comments))
        if ident is not None:
            last_id = ident
        normalized = data.replace("\r\n", "\n").replace("\r", "\n")
        expected.append(Event(normalized, kind or "message", last_id))
    return "".join(parts).encode(), expected


@settings(max_examples=300)
@given(streams(), st.lists(st.integers(0, 16), max_size=60))
def test_chunk_boundaries_anywhere_give_the_same_events(
    case: tuple[bytes, list[Event]], pieces: list[int]
) -> None:
    stream, expected = case
    assert parse(stream)[0] == expected
    assert parse(stream, pieces)[0] == expected  # 0-byte pieces, CR|LF and UTF-8 splits


@given(st.binary(max_size=300), st.lists(st.integers(0, 40), max_size=20))
def test_any_bytes_parse_the_same_in_any_pieces(stream: bytes, pieces: list[int]) -> None:
    assert parse(stream, pieces)[0] == parse(stream)[0]


# ---------------------------------------------------------------- the loop's parser

WORDS = ["x", "hello", "dätä", "€uro", "日本", "a b", "", " lead", "tail ", "🙂"]


@st.composite
def rough_streams(draw: st.DrawFn) -> bytes:
    """Streams as servers get them wrong and right: a BOM, comments, unknown fields,
    ``data`` without a colon, ids holding NUL, bad retries, CR/LF/CRLF mixed, an event
    never dispatched at the end."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 10))):
        for _ in range(draw(st.integers(0, 4))):
            word, space = draw(st.sampled_from(WORDS)), draw(st.sampled_from(["", " ", "  "]))
            lines.append(
                draw(
                    st.sampled_from(
                        [
                            f"data:{space}{word}",
                            "data",
                            f"id:{space}{draw(st.integers(0, 999))}",
                            f"id: 7\0{word}",
                            f"event:{space}{word}",
                            f"retry:{space}{draw(st.integers(0, 5000))}",
                            f"retry: 1{word}x",
                            f":{word}",
                            f"datax: {word}",
                            "id",
                            "retry",
                        ]
                    )
                )
            )
        lines.append("")  # dispatch
    if draw(st.booleans()):
        lines.append("data: never dispatched")
    text = "".join(line + draw(EOLS) for line in lines)
    return (("\ufeff" if draw(st.booleans()) else "") + text).encode()


def reference(stream: bytes) -> list[tuple[bytes, int, int]]:
    """Each event as the loop reports it: the last event id, the data's bytes, the retry
    in force when it was dispatched."""
    parser, out = SSEParser(), []
    for i in range(len(stream)):  # a byte at a time: the retry in force at each event
        for event in parser.feed(stream[i : i + 1]):
            data = len(event.data.encode())
            out.append((event.last_event_id.encode(), data, parser.retry_ms or 0))
    return out


def chunked(stream: bytes, sizes: list[int]) -> bytes:
    body, at = b"", 0
    for size in [*sizes, len(stream)]:
        piece = stream[at : at + max(1, size)]
        if piece:
            body += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        at += max(1, size)
    return body + b"0\r\n\r\n"


def cut(data: bytes, points: list[int]) -> list[bytes]:
    at = sorted({p % (len(data) + 1) for p in points})
    edges = [0, *at, len(data)]
    return [data[a:b] for a, b in pairwise(edges)]


@built
@settings(max_examples=300)
@given(rough_streams(), st.lists(st.integers(0, 1 << 12), max_size=30))
def test_the_loops_parser_agrees_with_the_reference_until_close(
    stream: bytes, points: list[int]
) -> None:
    events, ended, error = ENGINE.module.sse_parse(cut(stream, points))
    assert (events, ended, error) == (reference(stream), 0, 0)


@built
@settings(max_examples=300)
@given(
    rough_streams(),
    st.lists(st.integers(1, 20), max_size=30),
    st.lists(st.integers(0, 1 << 12), max_size=30),
)
def test_the_loops_parser_agrees_with_the_reference_chunked(
    stream: bytes, sizes: list[int], points: list[int]
) -> None:
    body = chunked(stream, sizes)
    events, ended, error = ENGINE.module.sse_parse(cut(body, points), True)
    assert (events, ended, error) == (reference(stream), 1, 0)  # the last chunk ends it


@built
def test_the_loop_refuses_a_malformed_chunk() -> None:
    events, ended, error = ENGINE.module.sse_parse([b"5\r\ndata:\r\nx"], True)
    assert (events, ended, error) == ([], 0, 12)  # E_BAD_CHUNK: no CRLF after the chunk
