"""An OpenSandbox server of one test folder's own, which it may kill and restart at will.

It is one more server of the stack's kind (dev/stack/servers.py writes its config and starts
it, from the stack's server venv and images) on a port and a sandbox port range of its own, so
killing it by its PID mid-command disturbs no other test's server. It reaches the Docker engine
through a view of its own (tests/engine_view.py) that shows it only the containers it made, so
starting it disturbs no other server's sandboxes either.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dev.stack import images, processes, servers
from dev.stack.servers import ServerSpec
from dev.stack.state import ServerInfo, StackState
from tests.engine_view import engine_view

# Past the stack's three servers (ports 18090-18092, sandbox ports from 41000 for indexes 0-2),
# one for each folder that stops a server: its port and its own range of sandbox ports.
RELIABILITY = ServerSpec("reliability", 18097, None, 5)
TOPOLOGY = ServerSpec("topology", 18098, None, 6)


class OwnServer:
    def __init__(
        self, spec: ServerSpec, api_key: str, choice: images.ImageChoice, docker_host: str
    ) -> None:
        self.spec = spec
        self.api_key = api_key
        self.choice = choice  # the stack's own images, so this server runs what the others do
        self.docker_host = docker_host  # its engine view

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(self.spec.name, servers.HOST, self.spec.port, self.api_key, None)

    def start(self) -> None:
        """Starts the server, or restarts it when it runs with another key."""
        servers.ensure_server(self.spec, self.api_key, self.choice, self.docker_host)
        servers.wait_healthy([self.spec])

    def kill(self) -> None:
        """SIGKILL, as an OOM killer or a crashed node would end it: no graceful shutdown."""
        record = processes.find(self.spec.process_name)
        if record is None:
            return
        os.kill(record.pid, signal.SIGKILL)
        while processes.find(self.spec.process_name) is not None:
            try:
                os.waitpid(record.pid, os.WNOHANG)  # ours to reap when this process started it
            except ChildProcessError:
                pass
            time.sleep(0.05)

    def rotate_key(self, new_key: str) -> None:
        """Restarts the server with ``new_key``; clients holding the old one are now refused."""
        self.api_key = new_key
        self.start()

    def stop(self) -> None:
        servers.stop_server(self.spec)


@contextmanager
def running_own_server(spec: ServerSpec, stack: StackState) -> Iterator[OwnServer]:
    """``spec``'s server, on a key of its own, the stack's images and an engine view of its
    own, started, and stopped after."""
    choice = images.ImageChoice(stack.images, stack.image_kinds)
    with engine_view(spec.directory / "engine.sock") as docker_host:
        server = OwnServer(spec, secrets.token_urlsafe(24), choice, docker_host)
        server.start()
        try:
            yield server
        finally:
            server.stop()
