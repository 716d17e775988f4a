"""``python forward.py LISTEN_HOST TARGET_HOST PORT...``: a TCP forward.

The stack's OpenSandbox servers listen on loopback only, which a network namespace cannot
reach; this listens on each port at the bridge's address and carries every connection to the
same port on loopback, so a worker in a namespace uses the servers as the host's tests do.
"""

from __future__ import annotations

import asyncio
import sys
from functools import partial

CHUNK_BYTES = 64 * 1024
# The event loop holds a task only weakly, and a connection whose reading is paused (its peer
# is slow to take the data) is held by nothing else: collected, its connection would drop.
_RUNNING: set[asyncio.Task[None]] = set()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK_BYTES):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _carry(
    target_host: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    carrier = asyncio.current_task()
    assert carrier is not None
    _RUNNING.add(carrier)
    try:
        try:
            target_reader, target_writer = await asyncio.open_connection(target_host, port)
        except OSError:
            writer.close()
            return
        # Each direction ends on its own (a half-close is passed on), the pair when both have.
        pipes = [
            asyncio.create_task(_pipe(reader, target_writer)),
            asyncio.create_task(_pipe(target_reader, writer)),
        ]
        _RUNNING.update(pipes)
        try:
            await asyncio.gather(*pipes)
        finally:
            _RUNNING.difference_update(pipes)
        writer.close()
        target_writer.close()
    finally:
        _RUNNING.discard(carrier)


async def serve(listen_host: str, target_host: str, ports: list[int]) -> None:
    servers = [
        await asyncio.start_server(partial(_carry, target_host, port), listen_host, port)
        for port in ports
    ]
    print(f"forwarding {listen_host} to {target_host} on ports {ports}", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2], [int(port) for port in sys.argv[3:]]))
