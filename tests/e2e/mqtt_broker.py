"""A fault-injecting MQTT 3.1.1 broker for e2e tests: asyncio in a thread, the packets
through ``tests/mqtt_codec.py``. It acknowledges publishers as the protocol says (PUBACK; PUBREC,
then PUBCOMP on PUBREL) and keeps each message's (clientId, seq) as the copies a
consumer would get, except where told to misbehave:

- ``drop_pubcomp``: every n-th PUBREL gets no PUBCOMP (the publisher never hears the
  message was completed: it stays unacknowledged; the broker has it once);
- ``lose``: every n-th message is acknowledged in full but never kept (acked, missing);
- ``duplicate``: every n-th message is kept twice (a second copy to the consumer);
- ``taken``: client ids already connected: a CONNECT with one is refused (CONNACK 2),
  after ``refuse_delay_s`` (a swarm's measured phase starts when its users are spawned,
  not connected).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests import mqtt_codec as codec
from tests.mqtt_codec import MalformedPacket, Packet


@dataclass
class FaultBroker:
    drop_pubcomp: int = 0
    lose: int = 0
    duplicate: int = 0
    taken: frozenset[str] = frozenset()
    refuse_delay_s: float = 0.0
    port: int = 0
    copies: list[tuple[int, int]] = field(default_factory=list)
    refused: int = 0
    pubrels = 0
    messages = 0
    malformed = 0
    pings = 0

    def keep(self, payload: bytes) -> None:
        self.messages += 1
        if self.lose and self.messages % self.lose == 0:
            return
        data = json.loads(payload)
        copy = (int(data["clientId"]), int(data["seq"]))
        self.copies.append(copy)
        if self.duplicate and self.messages % self.duplicate == 0:
            self.copies.append(copy)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buffer = b""
        pending: dict[int, bytes] = {}  # QoS 2: kept at PUBREL (method A), once
        try:
            while True:
                found = codec.decode(buffer)
                if found is None:
                    chunk = await reader.read(65536)
                    if not chunk:
                        return
                    buffer += chunk
                    continue
                packet, used = found
                buffer = buffer[used:]
                if packet.type == codec.CONNECT and packet.client_id in self.taken:
                    await asyncio.sleep(self.refuse_delay_s)
                if not self.answer(packet, pending, writer):
                    return
                await writer.drain()
        except MalformedPacket:
            self.malformed += 1
        except ConnectionError:
            pass
        finally:
            writer.close()

    def answer(self, p: Packet, pending: dict[int, bytes], writer: asyncio.StreamWriter) -> bool:
        send = writer.write
        if p.type == codec.CONNECT:
            refused = p.client_id in self.taken
            self.refused += refused
            send(codec.encode(Packet(codec.CONNACK, return_code=2 if refused else 0)))
            return not refused
        if p.type == codec.PUBLISH:
            if p.qos == 0:
                self.keep(p.payload)
            elif p.qos == 1:
                self.keep(p.payload)
                send(codec.encode(Packet(codec.PUBACK, packet_id=p.packet_id)))
            else:
                pending.setdefault(p.packet_id, p.payload)
                send(codec.encode(Packet(codec.PUBREC, packet_id=p.packet_id)))
        elif p.type == codec.PUBREL:
            payload = pending.pop(p.packet_id, None)
            if payload is not None:
                self.keep(payload)
            self.pubrels += 1
            if not (self.drop_pubcomp and self.pubrels % self.drop_pubcomp == 0):
                send(codec.encode(Packet(codec.PUBCOMP, packet_id=p.packet_id)))
        elif p.type == codec.PINGREQ:
            self.pings += 1
            send(codec.encode(Packet(codec.PINGRESP)))
        elif p.type == codec.DISCONNECT:
            return False
        return True


@contextmanager
def fault_broker(**faults: object) -> Iterator[FaultBroker]:
    """A running broker on 127.0.0.1 (its ``port``), stopped at the end."""
    broker = FaultBroker(**faults)  # type: ignore[arg-type]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    broker.port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    started = threading.Event()

    stop = asyncio.Event()

    async def serve() -> None:
        server = await asyncio.start_server(broker.handle, sock=sock)
        started.set()
        await stop.wait()
        server.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()
        await asyncio.gather(
            *asyncio.all_tasks() - {asyncio.current_task()}, return_exceptions=True
        )
        await server.wait_closed()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield broker
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
