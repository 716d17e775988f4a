"""A worker in a network namespace of its own, whose packets the test can lose, hold or reset.

The namespace has one veth pair to the host and no default route, so the only address its
processes can reach is the host's end of the pair. There, every connection is handed to a
relay of the test's own (:mod:`tests.reliability.latency_relay`), which connects to the same
port on the host's loopback, where the stack's servers and every sandbox's published ports
listen. Inside, loopback is sent to the host's end too, so a backend in the namespace uses the
very connection the host's tests use, and an endpoint the server names on loopback works the
same, direct or through the server.

Loss is the kernel's own: nftables drops a share of the packets, or all of them, in both
directions on the namespace's side of the pair. A broken connection is a TCP reset the relay
sends to both ends of every connection it holds. The one thing this machine's kernel cannot
do is delay packets (it has no ``sch_netem`` and loads no modules), so latency is added by the
relay, which holds everything it forwards for the delay it is given, in both directions.

Packets go only between this namespace, the host's end of its pair and the host's loopback.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from tests.reliability.latency_relay import LatencyRelay

# The /30 each namespace gets: 10.199.<index>.0, host .1, namespace .2.
SUBNET_BASE = "10.199"


def _run(*argv: str, namespace: str | None = None, stdin: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run([*prefix, *argv], check=True, capture_output=True, text=True, input=stdin)


@dataclass
class WorkerNamespace:
    """One namespace; ``index`` keeps namespaces of one run apart (0 to 255)."""

    index: int

    def __post_init__(self) -> None:
        tag = f"{os.getpid() % 100000}{self.index}"
        self.name = f"osbt-{tag}"
        self.host_link = f"osbh{tag}"
        self.inner_link = f"osbn{tag}"
        self.host_ip = f"{SUBNET_BASE}.{self.index}.1"
        self.inner_ip = f"{SUBNET_BASE}.{self.index}.2"
        self._nft_table = f"osbt_{tag}"
        self.relay = LatencyRelay(self.host_ip)

    def __enter__(self) -> WorkerNamespace:
        try:
            self._create()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _create(self) -> None:
        _run("ip", "netns", "add", self.name)
        _run("ip", "link", "add", self.host_link, "type", "veth", "peer", "name", self.inner_link)
        _run("ip", "link", "set", self.inner_link, "netns", self.name)
        _run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_link)
        _run("ip", "link", "set", self.host_link, "up")
        inner = self.name
        _run("ip", "addr", "add", f"{self.inner_ip}/30", "dev", self.inner_link, namespace=inner)
        _run("ip", "link", "set", self.inner_link, "up", namespace=inner)
        _run("ip", "link", "set", "lo", "up", namespace=inner)
        self.relay.start()
        # Every connection arriving from the namespace goes to the relay, which learns the port
        # it was meant for from the connection's original destination.
        _run(
            "nft",
            "-f",
            "-",
            stdin=f"""
table ip {self._nft_table} {{
  chain to_relay {{
    type nat hook prerouting priority dstnat;
    iifname "{self.host_link}" ip daddr {self.host_ip} tcp dport != {self.relay.port} \
dnat to {self.host_ip}:{self.relay.port}
  }}
}}
""",
        )
        # Loopback inside goes to the host's end, from the namespace's own address.
        for link in ("all", self.inner_link):
            _run("sysctl", "-qw", f"net.ipv4.conf.{link}.route_localnet=1", namespace=inner)
        _run(
            "nft",
            "-f",
            "-",
            namespace=inner,
            stdin=f"""
table ip loopback_to_host {{
  chain out {{
    type nat hook output priority -100;
    ip daddr 127.0.0.1 dnat to {self.host_ip}
  }}
  chain post {{
    type nat hook postrouting priority srcnat;
    oifname "{self.inner_link}" masquerade
  }}
}}
table inet faults {{
  chain inbound {{ type filter hook input priority 0; }}
  chain outbound {{ type filter hook output priority 0; }}
}}
""",
        )

    def command(self, *argv: str) -> list[str]:
        """``argv`` as a command line that runs inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    # ------------------------------------------------------------------
    # Faults
    # ------------------------------------------------------------------

    def lose(self, percent: int) -> None:
        """Drop ``percent`` % of the packets in each direction, chosen at random by the kernel."""
        self.restore()
        # nft refuses a comparison no packet can fail, so all of them is a plain drop.
        share = "drop" if percent >= 100 else f"numgen random mod 100 < {percent} drop"
        self._rule("inbound", f'iifname "{self.inner_link}" {share}')
        self._rule("outbound", f'oifname "{self.inner_link}" {share}')

    def blackhole(self) -> None:
        """Drop every packet in both directions: the worker's network is gone."""
        self.lose(100)

    def reset_connections(self) -> None:
        """End every connection the worker has open with a TCP reset, sent by the relay."""
        self.relay.reset_all()

    def delay(self, seconds: float) -> None:
        """Hold every piece of data the worker sends or receives for ``seconds``."""
        self.relay.delay = seconds

    def freeze_connections_that_received(self, at_least: int) -> list[int]:
        """Drop every packet of the connections open now that have received ``at_least``
        bytes, in both directions, and nothing else: a stream that carried that much goes
        silent, while the worker's other connections, and any it opens later, still pass.
        Returns the frozen connections' local ports."""
        listing = subprocess.run(
            self.command("ss", "-Htni", "state", "established"),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        frozen = []
        local_port = None
        # Each connection is a line of addresses (queues, local, peer), then an indented line
        # of its counters.
        for line in listing.splitlines():
            if not line[:1].isspace():
                local_port = int(line.split()[2].rpartition(":")[2])
            elif local_port is not None and (got := re.search(r"\bbytes_received:(\d+)", line)):
                if int(got[1]) >= at_least:
                    frozen.append(local_port)
        for port in frozen:
            self._rule("inbound", f"tcp dport {port} drop")
            self._rule("outbound", f"tcp sport {port} drop")
        return frozen

    def restore(self) -> None:
        """No more drops or resets; the relay's delay is left as it is."""
        for chain in ("inbound", "outbound"):
            _run("nft", "flush", "chain", "inet", "faults", chain, namespace=self.name)

    def _rule(self, chain: str, rule: str) -> None:
        _run("nft", f"add rule inet faults {chain} {rule}", namespace=self.name)

    def remove(self) -> None:
        """Delete the namespace (which takes its end of the pair, and so both ends) and the
        host's rule; each only if it exists."""
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.host_link], capture_output=True)
        subprocess.run(["nft", "delete", "table", "ip", self._nft_table], capture_output=True)
        self.relay.stop()
