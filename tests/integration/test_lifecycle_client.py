"""One backend talks to the server's lifecycle API over one client, against the real server.

Reading tags, claiming, renewing and releasing are all lifecycle calls. Each used to build an
SDK manager of its own, so each paid a new connection (and, over TLS, a new handshake); here
the connections the whole attach-and-release round opens to the server are counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpcore
import pytest
from airflow.providers.common.ai.sandbox.base import HOLDER_TAG, SandboxSpec

from dev.stack.state import ServerInfo

OWNER = "client_dag/manual__2026-01-01T00:00:00+00:00"
HOLDER = f"{OWNER}/agent"


@contextmanager
def connections_to(server: ServerInfo) -> Iterator[list[int]]:
    """Every TCP connection opened to ``server`` in the block, by any httpcore pool."""
    opened: list[int] = []
    connect = httpcore.SyncBackend.connect_tcp

    def counting(self, host, port, *args, **kwargs):
        if port == server.port:
            opened.append(port)
        return connect(self, host, port, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpcore.SyncBackend, "connect_tcp", counting)
        yield opened


def test_tag_reads_claims_and_renewals_share_one_connection(backend_on, plain_server):
    backend = backend_on(plain_server, sandbox_timeout=300)
    handle = backend.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        with connections_to(plain_server) as opened:
            for _ in range(3):
                backend.read_tags(handle)
            backend.attach(handle, owner=OWNER, holder=HOLDER)  # read, claim, re-read, renew
            backend.release(handle, holder=HOLDER)  # read, clear, closing renewal
            tags = backend.read_tags(handle)

        assert HOLDER_TAG not in tags
        assert len(opened) == 1, f"{len(opened)} connections for one backend's lifecycle calls"
    finally:
        backend.destroy(handle)
