"""MQTT over WebSocket in front of Mosquitto: each WebSocket connection (subprotocol
"mqtt", binary frames) is one connection to the broker's unix socket, bytes passed as
they come both ways. Debian's Mosquitto 2.0.11 is built without libwebsockets, so its
own `protocol websockets` listener is not available."""

import asyncio
import os

import websockets

SOCKET = os.environ.get("MOSQUITTO_SOCKET", "/tmp/mosquitto.sock")


async def broker():
    """A connection to Mosquitto; at start its socket may exist before it listens."""
    for _ in range(50):
        try:
            return await asyncio.open_unix_connection(SOCKET)
        except (ConnectionRefusedError, FileNotFoundError):
            await asyncio.sleep(0.1)
    return await asyncio.open_unix_connection(SOCKET)


async def handle(ws, _path=None):
    reader, writer = await broker()

    async def up():
        async for message in ws:
            writer.write(message if isinstance(message, bytes) else message.encode())
            await writer.drain()
        writer.close()

    async def down():
        while data := await reader.read(65536):
            await ws.send(data)
        await ws.close()

    await asyncio.gather(up(), down(), return_exceptions=True)
    writer.close()


async def main():
    host, port = os.environ.get("BIND", "127.0.0.1"), int(os.environ["PORT"])
    async with websockets.serve(
        handle,
        host,
        port,
        subprotocols=["mqtt"],
        max_size=None,
        compression=None,
        ping_interval=None,
    ):
        await asyncio.Future()


asyncio.run(main())
