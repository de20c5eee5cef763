"""A one-thread asyncio HTTP/1.1 server for process-target e2e tests, as source text.

``asyncio_server(respond)`` gives a ``server.py`` whose every request is answered with
the bytes ``respond()`` returns (defined by the test's ``respond`` source, which may
keep state or block the whole server on purpose; an ``async def respond()`` may await,
delaying its own connection only), keep-alive, on 127.0.0.1:$PORT.
"""

from __future__ import annotations

import textwrap

TEMPLATE = """
import asyncio, hashlib, os, time

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

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(os.environ["PORT"]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def asyncio_server(respond: str) -> str:
    """``server.py``'s source; ``respond`` defines ``respond() -> bytes``."""
    return TEMPLATE.format(respond=textwrap.dedent(respond).strip())
