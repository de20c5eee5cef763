"""A one-thread asyncio WebSocket and server-sent events server for the stream e2e tests,
as source text (a test writes it as ``server.py`` and starts it with ``webperf.process``).

Its frames are ``pytest_webperf.longlived.frame``'s and its events ``longlived.events``'
(the reference codecs; the native loop under test has its own). The routes are the
catalogue's stream servers' (``servers/node-streams``, ``servers/go-streams``):

- ``/ws``: every message echoed as it came (``?answer=TEXT``: answered with TEXT
  instead, for ``correlate="order"``); ``?close=CODE&after=N``: after N echoes,
  close with CODE ("internal error"); ``?abort=N``: after N echoes drop the TCP
  connection (no close frame); ``?fragment=N``: echo in frames of N bytes, a ping
  between the first two;
- ``/relay?role=sub|pub``: what a publisher sends goes to every subscriber;
  ``&drop=K`` on a subscriber: every K-th message it would get is skipped;
- ``/events?rate=R``: R events a second per stream, each with an id (``Last-Event-ID``
  resumes after it); ``&first_delay=MS``: the first event that much later (the
  server's own ``FIRST_DELAY_MS`` is added: what an A/B test changes); ``&count=N``:
  the stream ends after N events (``retry: 100`` first);
- ``/health``: 200.

Over TLS (wss://, https://) when ``$TLS_CERT`` and ``$TLS_KEY`` name a certificate and
its key.
"""

from __future__ import annotations

TEMPLATE = r'''
import asyncio, os, ssl
from urllib.parse import parse_qs, urlsplit

from pytest_webperf.longlived.events import encode_event
from pytest_webperf.longlived.frame import (
    Assembler, Frame, FrameDecoder, Message, Opcode, ProtocolError, accept_key, close_payload,
    encode, fragment,
)

FIRST_DELAY_MS = {first_delay_ms}
subscribers = []


def frame(opcode, payload, fin=True):
    return encode(Frame(opcode, payload, fin=fin))


async def frames(reader):
    """Whole messages and control frames from a client, until it closes or errs."""
    decoder, assembler = FrameDecoder(masked=True), Assembler()
    while True:
        data = await reader.read(65536)
        if not data:
            return
        try:
            for piece in decoder.feed(data):
                out = assembler.add(piece)
                if out is not None:
                    yield out
        except ProtocolError:
            return


async def echo(reader, writer, query):
    close, after = int(query.get("close", 0)), int(query.get("after", 0))
    abort, size = int(query.get("abort", 0)), int(query.get("fragment", 0))
    answer = query.get("answer", "").encode()
    echoed = 0
    async for out in frames(reader):
        if isinstance(out, Message):
            parts = [Frame(Opcode.TEXT, answer) if answer else Frame(out.opcode, out.payload)]
            if size:
                parts = fragment(out.opcode, out.payload, [size] * (len(out.payload) // size + 1))
            for i, part in enumerate(parts):
                writer.write(encode(part))
                if i == 0 and len(parts) > 1:
                    writer.write(frame(Opcode.PING, b"between"))
            echoed += 1
            if abort and echoed >= abort:
                writer.transport.abort()  # no close frame: the client sees 1006
                return
            if close and echoed >= after:
                writer.write(frame(Opcode.CLOSE, close_payload(close, "internal error")))
                await writer.drain()
                return
        elif out.opcode == Opcode.PING:
            writer.write(frame(Opcode.PONG, out.payload))
        elif out.opcode == Opcode.CLOSE:
            writer.write(frame(Opcode.CLOSE, out.payload[:2]))
            await writer.drain()
            return
        await writer.drain()


async def relay(reader, writer, query):
    if query.get("role") == "sub":
        me = [writer, int(query.get("drop", 0)), 0]
        subscribers.append(me)
        try:
            async for out in frames(reader):
                if isinstance(out, Frame) and out.opcode == Opcode.CLOSE:
                    writer.write(frame(Opcode.CLOSE, out.payload[:2]))
                    break
        finally:
            subscribers.remove(me)
        return
    async for out in frames(reader):
        if isinstance(out, Message):
            for sub in list(subscribers):
                sub[2] += 1
                if sub[1] and sub[2] % sub[1] == 0:
                    continue  # the failure test's loss
                sub[0].write(frame(out.opcode, out.payload))
        elif out.opcode == Opcode.CLOSE:
            writer.write(frame(Opcode.CLOSE, out.payload[:2]))
            return


def chunk(text):
    data = text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


async def events(reader, writer, query, headers):
    rate = float(query.get("rate", 20))
    count = int(query.get("count", 0))
    delay = (FIRST_DELAY_MS + float(query.get("first_delay", 0))) / 1000
    last = headers.get("last-event-id", "")
    ident = int(last) + 1 if last.isdigit() else 1
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    if count:
        writer.write(chunk("retry: 100\n\n"))
    await writer.drain()
    await asyncio.sleep(delay)
    sent = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not count or sent < count:
        writer.write(chunk(encode_event(f"tick {ident}", event="tick", id=str(ident))))
        await writer.drain()
        ident += 1
        sent += 1
        if rate <= 0:
            break
        await asyncio.sleep(max(0.0, start + sent / rate - loop.time()))
    if count:
        writer.write(b"0\r\n\r\n")  # the stream ends: the client comes back after its retry
        await writer.drain()
        return
    await reader.read()  # an idle stream stays open until the client goes


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        target = lines[0].split(" ")[1]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path in ("/ws", "/relay") and headers.get("upgrade", "").lower() == "websocket":
            key = headers["sec-websocket-key"]
            writer.write(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept_key(key).encode() + b"\r\n\r\n"
            )
            await (echo if url.path == "/ws" else relay)(reader, writer, query)
        elif url.path == "/events":
            await events(reader, writer, query, headers)
        else:
            status = b"200 OK" if url.path == "/health" else b"404 Not Found"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, IndexError, KeyError):
        pass
    finally:
        writer.close()


def tls():
    if not os.environ.get("TLS_CERT"):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.environ["TLS_CERT"], os.environ["TLS_KEY"])
    context.set_alpn_protocols(["http/1.1"])
    return context


async def main():
    port = int(os.environ["PORT"])
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096, ssl=tls())
    async with server:
        await server.serve_forever()


asyncio.run(main())
'''


def streams_server(first_delay_ms: int = 0) -> str:
    """``server.py``'s source: its first SSE event ``first_delay_ms`` later than asked."""
    return TEMPLATE.replace("{first_delay_ms}", str(first_delay_ms))
