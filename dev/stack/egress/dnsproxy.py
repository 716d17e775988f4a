"""The DNS proxy every query of the sandbox is redirected to, after `pkg/dnsproxy/proxy.go`
(docs/execd-wire.rst, wire-egress-modes)."""

from __future__ import annotations

import socket
from collections.abc import Callable

import dnswire
from policy import DENY, Policy

LISTEN = ("127.0.0.1", 15353)
# `DefaultDNSUpstreamTimeoutSec`.
UPSTREAM_TIMEOUT_S = 5.0
# Linux's SO_MARK; Python 3.11's socket module does not export the name.
SO_MARK = 36


def nameservers(resolv_conf: str = "/etc/resolv.conf") -> list[str]:
    """The upstreams, in file order. Unlike the sidecar there is no public fallback resolver:
    a sandbox of the local stack must never query anything but the stack's own resolver."""
    with open(resolv_conf) as f:
        found = [
            parts[1] for line in f if len(parts := line.split()) >= 2 and parts[0] == "nameserver"
        ]
    if not found:
        raise SystemExit(f"{resolv_conf} lists no nameserver; start the container with --dns.")
    return found


class Proxy:
    def __init__(
        self,
        policy: Callable[[], Policy],
        upstreams: list[str],
        mark: int,
        on_resolved: Callable[[list[tuple[str, int]]], None] | None,
    ) -> None:
        self._policy = policy
        self._upstreams = upstreams
        self._mark = mark
        self._on_resolved = on_resolved

    def answer(self, data: bytes) -> bytes | None:
        try:
            query = dnswire.parse_query(data)
        except ValueError:
            return None
        # A denied name is answered NXDOMAIN here and never leaves the namespace.
        if self._policy().evaluate(query.name) == DENY:
            return dnswire.build_response(query, dnswire.RCODE_NXDOMAIN)
        reply = self._forward(data)
        if reply is None:
            # An upstream failure is SERVFAIL, never a silent drop.
            return dnswire.build_response(query, dnswire.RCODE_SERVFAIL)
        # dns+nft: the answer's addresses are allowed before the client sees them, so its
        # first connection cannot race the rule (`maybeNotifyResolved`).
        if self._on_resolved is not None and (addresses := dnswire.answer_addresses(reply)):
            self._on_resolved(addresses)
        return reply

    def _forward(self, data: bytes) -> bytes | None:
        # The upstreams are tried in order; NOERROR and NXDOMAIN are final, other codes fail over.
        for upstream in self._upstreams:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, SO_MARK, self._mark)
                sock.settimeout(UPSTREAM_TIMEOUT_S)
                try:
                    sock.connect((upstream, 53))
                    sock.send(data)
                    reply = sock.recv(65535)
                except OSError:
                    continue
            if dnswire.rcode(reply) in (dnswire.RCODE_NOERROR, dnswire.RCODE_NXDOMAIN):
                return reply
        return None
