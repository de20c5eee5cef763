"""A one-thread asyncio HTTP/1.1 server for process-target e2e tests, as source text.

``asyncio_server(respond)`` gives a ``server.py`` whose every request is answered with
the bytes ``respond()`` returns (defined by the test's ``respond`` source, which may
keep state or block the whole server on purpose; an ``async def respond()`` may await,
delaying its own connection only), keep-alive, on 127.0.0.1:$PORT; over TLS when
$TLS_CERT and $TLS_KEY name a certificate and its key (ALPN http/1.1).
"""

from __future__ import annotations

import textwrap

TEMPLATE = """
import asyncio, hashlib, os, ssl, time

{respond}

async def handle(reader, writer):
    while True:
        try:
            await reader.readuntil(b"\\r\\n\\r\\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        body = respond()
        if asyncio.iscoroutine(body):  # an async respond(): waits without blocking others
            body = await body
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
        await writer.drain()
    writer.close()

def tls():
    if not os.environ.get("TLS_CERT"):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.environ["TLS_CERT"], os.environ["TLS_KEY"])
    context.set_alpn_protocols(["http/1.1"])
    return context

async def main():
    server = await asyncio.start_server(
        handle, "127.0.0.1", int(os.environ["PORT"]), ssl=tls()
    )
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def asyncio_server(respond: str) -> str:
    """``server.py``'s source; ``respond`` defines ``respond() -> bytes``."""
    return TEMPLATE.format(respond=textwrap.dedent(respond).strip())


# The paced and arrival-rate tests' server. STALL_AFTER: the first request that arrives
# that many seconds after the first one blocks the whole server for a second, once.
# DELAY: every request waits that long (for itself only: others are answered meanwhile).
STALLING_SERVER = asyncio_server(
    """
    STALL_AFTER = float(os.environ.get("STALL_AFTER", "0"))
    DELAY = float(os.environ.get("DELAY", "0"))
    first = None
    stalled = False

    async def respond():
        global first, stalled
        now = time.monotonic()
        first = first or now
        if STALL_AFTER and not stalled and now - first >= STALL_AFTER:
            stalled = True
            time.sleep(1.0)
        if DELAY:
            await asyncio.sleep(DELAY)
        return b"ok"
    """
)
