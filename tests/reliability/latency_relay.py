"""A TCP relay that forwards each connection to the same port on loopback, late if told to.

The namespace's nftables rule sends every connection here (see
:mod:`tests.reliability.worker_namespace`); the port it was meant for is its original
destination, which the kernel keeps for a connection it translated (``SO_ORIGINAL_DST``).
Each direction is forwarded in order, each piece no sooner than :attr:`LatencyRelay.delay`
seconds after it arrived: the latency a kernel without ``sch_netem`` cannot add. It can also
end every connection it holds with a reset, as a link that breaks does.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time

# linux/netfilter_ipv4.h: the original destination of a connection NAT redirected.
SO_ORIGINAL_DST = 80
PIECE = 64 * 1024


class LatencyRelay:
    def __init__(self, address: str) -> None:
        self._address = address
        self.delay = 0.0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        assert self._listener is not None
        return self._listener.getsockname()[1]

    def start(self) -> None:
        listener = socket.create_server((self._address, 0), backlog=64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        with self._lock:
            everything = [self._listener, *self._sockets]
            self._sockets.clear()
        for sock in everything:
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # a listener, or a socket already ended
                sock.close()

    def reset_all(self) -> None:
        """End every connection now with a TCP reset to both ends, as a broken link does."""
        with self._lock:
            everything = list(self._sockets)
            self._sockets.clear()
        for sock in everything:
            try:
                # A zero linger makes the end a reset instead of an orderly close. Closing alone
                # would not end a socket another thread is reading: the shutdown wakes that read.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        raw = client.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port = struct.unpack_from("!H", raw, 2)[0]
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._sockets += [client, upstream]
        for source, target in ((client, upstream), (upstream, client)):
            pieces: queue.Queue[tuple[float, bytes]] = queue.Queue()
            threading.Thread(target=self._read, args=(source, pieces), daemon=True).start()
            threading.Thread(target=self._write, args=(target, pieces), daemon=True).start()

    def _read(self, source: socket.socket, pieces: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            try:
                data = source.recv(PIECE)
            except OSError:
                data = b""
            pieces.put((time.monotonic() + self.delay, data))
            if not data:
                return

    def _write(self, target: socket.socket, pieces: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            due, data = pieces.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not data:
                    target.shutdown(socket.SHUT_WR)
                    return
                target.sendall(data)
            except OSError:
                return
