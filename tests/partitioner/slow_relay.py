"""A TCP relay in front of one Kafka broker that makes it a slow broker for produce requests.

Run as a process of its own (so that its timing does not share an interpreter with the
clients under test)::

    python slow_relay.py LISTEN_PORT TARGET_HOST:TARGET_PORT PRODUCE_MS

It forwards every connection to the target and reads the Kafka framing both ways (4-byte size,
then the request header's api key and correlation id; responses come back in request order).
The broker then behaves like KIP-794's slow broker: it serves a connection's requests one at a
time, and each Produce request takes PRODUCE_MS longer (a response is released at
``max(request arrival, previous release) + PRODUCE_MS``); other responses (Metadata,
ApiVersions …) are only kept in order. Producers must use acks=1 or all (an acks=0 Produce gets
no response, and the relay stops at the next response it cannot match). Prints ``READY
<port>`` once listening; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import sys

PRODUCE = 0


async def _frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(4)
    return head + await reader.readexactly(int.from_bytes(head, "big"))


async def _relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter,
                 target: tuple[str, int], produce_s: float) -> None:
    loop = asyncio.get_running_loop()
    try:
        broker_r, broker_w = await asyncio.open_connection(*target)
    except OSError:
        client_w.close()
        return
    pending: collections.deque[tuple[int, int, float]] = collections.deque()

    async def upstream() -> None:
        while True:
            frame = await _frame(client_r)
            api_key = int.from_bytes(frame[4:6], "big")
            correlation = int.from_bytes(frame[8:12], "big")
            pending.append((correlation, api_key, loop.time()))
            broker_w.write(frame)
            await broker_w.drain()

    async def downstream() -> None:
        released = 0.0
        while True:
            frame = await _frame(broker_r)
            correlation = int.from_bytes(frame[4:8], "big")
            expected, api_key, arrived = pending.popleft()
            if expected != correlation:
                raise RuntimeError(f"response {correlation} out of order (expected {expected})")
            release = max(released, loop.time())
            if api_key == PRODUCE:
                release = max(arrived, released) + produce_s
            await asyncio.sleep(max(0.0, release - loop.time()))
            released = max(release, loop.time())
            client_w.write(frame)
            await client_w.drain()

    tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for writer in (client_w, broker_w):
            writer.close()


async def main(listen_port: int, target: tuple[str, int], produce_ms: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: _relay(r, w, target, produce_ms / 1000.0), "127.0.0.1", listen_port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    host, port = sys.argv[2].rsplit(":", 1)
    asyncio.run(main(int(sys.argv[1]), (host, int(port)), float(sys.argv[3])))
