"""The only nameserver sandboxes of the local stack can reach: an authoritative-only DNS server.

dockerd runs with `--dns <bridge address>`, so every sandbox resolves through this program. It
answers A queries for the names of its zone and never forwards anything, so no test can leak a
query (or, through it, a packet) to the outside world.

    python3 -m dev.stack.resolver --bind 172.17.255.254 --port 53 --zone allowed.test=172.17.0.1
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import threading

from dev.stack.egress import dnswire
from dev.stack.egress.dnsserve import DNSServer

BRIDGE_IP = "172.17.0.1"

# The names the network tests rely on; every one resolves to the bridge address, the only
# address a test may send packets to. `other.test` must exist here too: a sandbox getting
# NXDOMAIN for it then proves the egress policy, not this zone, refused the name.
ALLOWED_NAME = "allowed.test"
OTHER_NAME = "other.test"
WILDCARD_NAME = "api.wild.test"
DEFAULT_ZONE = {ALLOWED_NAME: BRIDGE_IP, OTHER_NAME: BRIDGE_IP, WILDCARD_NAME: BRIDGE_IP}


class Zone:
    def __init__(self, records: dict[str, str]) -> None:
        self._records = {dnswire.normalize_name(name): ip for name, ip in records.items()}

    def answer(self, data: bytes) -> bytes | None:
        try:
            query = dnswire.parse_query(data)
        except ValueError:
            return None
        if not query.is_standard_query or query.qclass != dnswire.CLASS_IN:
            return dnswire.build_response(query, dnswire.RCODE_REFUSED)
        address = self._records.get(query.name)
        if address is None:
            return dnswire.build_response(query, dnswire.RCODE_NXDOMAIN)
        # A name of the zone asked for another type (AAAA from getaddrinfo) exists but has no
        # such record: NOERROR with no answer, so the resolver still uses the A record.
        addresses = [address] if query.qtype == dnswire.TYPE_A else []
        return dnswire.build_response(query, dnswire.RCODE_NOERROR, addresses)


def _zone_entry(text: str) -> tuple[str, str]:
    name, sep, address = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--zone takes NAME=IPV4, got {text!r}.")
    try:
        ipaddress.IPv4Address(address)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--zone {text!r}: {exc}.") from exc
    return name, address


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default=BRIDGE_IP)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument(
        "--zone",
        type=_zone_entry,
        action="append",
        help="NAME=IPV4, repeatable; without any, the default zone of the network tests",
    )
    args = parser.parse_args(argv)
    zone = Zone(dict(args.zone) if args.zone else DEFAULT_ZONE)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    DNSServer(args.bind, args.port, zone.answer)
    print(f"resolver listening on {args.bind}:{args.port} (udp, tcp)", flush=True)
    stop.wait()


if __name__ == "__main__":
    main()
