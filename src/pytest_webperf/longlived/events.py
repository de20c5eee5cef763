"""Server-sent events as text and back: an incremental parser of the event-stream format
(WHATWG HTML, "Interpreting an event stream"), the reference the native engine's
byte-at-a-time parser is checked against (``swarm/native/sse.c``), and ``encode_event`` for the
tests' SSE servers.

Bytes are fed in pieces of any size; the stream is decoded as UTF-8 (invalid bytes
replaced, a character split across pieces joined), one leading BOM dropped, and cut into
lines at CR, LF or CRLF (a CR at the end of one piece and the LF at the start of the next
are one line end). A line starting with a colon is a comment; ``field: value`` loses one
space after the colon; a line without a colon is a field with an empty value. ``data``
lines are joined with LF; ``event`` names the type; ``id`` (unless it holds NUL) sets the
last event ID buffer; ``retry`` (ASCII digits only) the reconnection time. A blank line
dispatches: the last event ID is set, and an event is given if any data was buffered.
Whatever follows the last blank line when the stream ends is discarded (``close``).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    data: str
    type: str = "message"
    last_event_id: str = ""


class SSEParser:
    """One stream's parser. ``last_event_id`` and ``retry_ms`` are the source's: they
    outlive the stream (``restart`` begins the next one, as a reconnect does)."""

    def __init__(self, last_event_id: str = "") -> None:
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self.restart()

    def restart(self) -> None:
        """A new stream (a reconnect): empty buffers, the source's last id kept."""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._line: list[str] = []
        self._after_cr = False
        self._started = False  # the BOM check is done
        self._data: list[str] = []
        self._type = ""
        self._id_buffer = ""

    def feed(self, chunk: bytes) -> list[Event]:
        return self._text(self._decoder.decode(chunk))

    def close(self) -> list[Event]:
        """The stream ended: what the decoder held is flushed; an incomplete event is
        dropped (as the standard says)."""
        events = self._text(self._decoder.decode(b"", final=True))
        self._line = []
        self._data, self._type = [], ""
        return events

    def _text(self, text: str) -> list[Event]:
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        events: list[Event] = []
        start = 0
        for i, ch in enumerate(text):
            if ch not in "\r\n":
                continue
            if ch == "\n" and self._after_cr and i == start and not self._line:
                self._after_cr = False  # the LF of a CRLF
                start = i + 1
                continue
            self._line.append(text[start:i])
            line = "".join(self._line)
            self._line = []
            self._after_cr = ch == "\r"
            start = i + 1
            event = self._process(line)
            if event is not None:
                events.append(event)
        if start < len(text):
            self._line.append(text[start:])
            self._after_cr = False
        return events

    def _process(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry" and value and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Event | None:
        self.last_event_id = self._id_buffer
        if not self._data:
            self._type = ""
            return None
        event = Event("\n".join(self._data), self._type or "message", self.last_event_id)
        self._data, self._type = [], ""
        return event


def encode_event(
    data: str,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
    eol: str = "\n",
    comments: tuple[str, ...] = (),
) -> str:
    """One event as a server writes it (data lines split at its line ends)."""
    lines = [f":{c}" for c in comments]
    if retry is not None:
        lines.append(f"retry: {retry}")
    if event is not None:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    parts = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines.extend(f"data: {part}" for part in parts)
    return eol.join(lines) + eol + eol
