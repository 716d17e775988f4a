"""Sandboxes, listeners and probes for proving egress enforcement with real packets.

Every packet a test sends goes to the Docker bridge address (where the test's own listener
waits) or to a name of our resolver's zone, which resolves to that same address.
"""

from __future__ import annotations

import json
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException, SandboxConnectionException
from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule

from dev.stack.state import ServerInfo, StackState

# Long enough for a SYN to an answering host on the same machine, so a timeout means the
# packet was dropped; short enough that the deny tests stay quick.
CONNECT_TIMEOUT_S = 3
# `DEFAULT_EGRESS_PORT` of the SDK.
EGRESS_PORT = 18080
# A bound on any one command in a sandbox, so a broken stack fails a test instead of hanging it.
COMMAND_BOUND_S = 60

# How long a destroy waits for a server that is being restarted.
DESTROY_BOUND_S = 60

# Runs inside the sandbox: resolve with the system resolver (our resolver behind the sidecar's
# DNS proxy), then connect, and name the outcome so a drop, a refusal and NXDOMAIN differ.
_PROBE = """
import json, socket, sys
def reach(host, port):
    try:
        addr = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    except socket.gaierror as e:
        return "nxdomain" if e.errno == socket.EAI_NONAME else "dns-error %d" % e.errno
    try:
        socket.create_connection(addr, timeout=float(sys.argv[1])).close()
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "dropped"
    except OSError as e:
        return "dropped" if e.errno == 1 else "error %d" % e.errno
print(json.dumps([reach(h, int(p)) for h, p in json.loads(sys.argv[2])]))
"""


class Listener:
    """A TCP listener on the bridge address that records who connected to it."""

    def __init__(self, host: str) -> None:
        self._sock = socket.create_server((host, 0))
        self.host = host
        self.port = self._sock.getsockname()[1]
        self.peers: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self._sock.accept()
            except OSError:
                return
            self.peers.append(peer[0])
            conn.close()

    def close(self) -> None:
        self._sock.close()


def deny_all() -> NetworkPolicy:
    return NetworkPolicy(defaultAction="deny", egress=[])


def allowing(*targets: str) -> NetworkPolicy:
    rules = [NetworkRule(action="allow", target=target) for target in targets]
    return NetworkPolicy(defaultAction="deny", egress=rules)


@contextmanager
def sandbox(
    server: ServerInfo, stack: StackState, policy: NetworkPolicy | None = None, **options: Any
) -> Iterator[SandboxSync]:
    """A sandbox on `server`, destroyed on exit whatever the test did."""
    sb = SandboxSync.create(
        stack.sandbox_image,
        connection_config=server.connection_config(),
        network_policy=policy,
        **options,
    )
    try:
        yield sb
    finally:
        _destroy(sb)
        sb.close()


def _destroy(sb: SandboxSync) -> None:
    # The stack's servers may be restarting (a stack restart takes seconds); waiting for them
    # beats leaking the sandbox until it expires.
    deadline = time.monotonic() + DESTROY_BOUND_S
    while True:
        try:
            sb.destroy()
            return
        except SandboxApiException as error:
            if error.status_code == 404:
                return
            raise
        except SandboxConnectionException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def reach(sb: SandboxSync, *targets: tuple[str, int]) -> list[str]:
    """From inside `sb`, try each (host, port) in turn; one outcome word per target."""
    command = shlex.join(["python3", "-c", _PROBE, str(CONNECT_TIMEOUT_S), json.dumps(targets)])
    execution = sb.commands.run(
        command, opts=RunCommandOpts(timeout=timedelta(seconds=COMMAND_BOUND_S))
    )
    stdout = "".join(message.text for message in execution.logs.stdout)
    stderr = "".join(message.text for message in execution.logs.stderr)
    assert execution.error is None, f"The probe failed in the sandbox: {execution.error} {stderr}"
    return json.loads(stdout)


def egress_api(sb: SandboxSync) -> tuple[str, dict[str, str]]:
    """The sidecar's base URL and headers exactly as the SDK resolves them (port 18080)."""
    endpoint = sb.get_endpoint(EGRESS_PORT)
    return f"http://{endpoint.endpoint}", dict(endpoint.headers)
