"""The cluster's addresses: the node's own address, the pod and service ranges, the CNI bridge.

The ranges are chosen away from Docker's default 172.17.0.0/16 and the private ranges Docker
hands to user networks (172.18-31.x, 192.168.x); ``check_free`` refuses to start when a route
on this machine already covers either, instead of breaking whatever owns it.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path
from typing import Any

POD_CIDR = "10.213.0.0/24"
SERVICE_CIDR = "10.214.0.0/24"
# Its own name, so the bridge plugin never touches docker0 or a bridge of the stack.
BRIDGE = "osbkube0"
CNI_NETWORK = "opensandbox-kube"
CNI_VERSION = "1.0.0"
# Our resolver for the pods, on the bridge beside the gateway and kept out of the pods' range:
# apart from the gateway, where the network tests' listeners wait, because an egress sidecar
# lets a sandbox reach its nameserver whatever its policy.
RESOLVER_IP = "10.213.0.254"
LAST_POD_IP = "10.213.0.250"


def gateway_ip() -> str:
    """This host's address on the pod bridge (the bridge plugin's gateway, the range's first):
    where a pod reaches the host, and our resolver for pods listens."""
    return str(next(ipaddress.ip_network(POD_CIDR).hosts()))


def service_ip() -> str:
    """The ``kubernetes`` Service's address: the first of the service range."""
    return str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))


def cni_conflist(ipam_dir: Path) -> dict[str, Any]:
    """A bridge network with host-local addresses kept in ``ipam_dir``, and the firewall
    plugin: Docker sets the FORWARD policy to DROP, and the plugin accepts traffic of this
    network's pods only."""
    return {
        "cniVersion": CNI_VERSION,
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                # No masquerading: pods talk to each other and to this host, never beyond it.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(ipam_dir),
                    "ranges": [[{"subnet": POD_CIDR, "rangeEnd": LAST_POD_IP}]],
                    "routes": [{"dst": POD_CIDR}],
                },
            },
            {"type": "firewall"},
        ],
    }


def node_ip(
    routes: list[dict[str, Any]] | None = None, addresses: list[dict[str, Any]] | None = None
) -> str:
    """The IPv4 address of the interface the default route leaves by: the node's own address,
    which the kubelet reports and serves on (it refuses a loopback node address)."""
    routes = _ip_json("route", "show", "default") if routes is None else routes
    if not routes:
        raise RuntimeError(
            "This machine has no default IPv4 route, so the node has no address of its own. "
            "Bring up a network interface with a default route and run `up` again."
        )
    device = routes[0]["dev"]
    addresses = _ip_json("addr", "show", "dev", device) if addresses is None else addresses
    for interface in addresses:
        for address in interface.get("addr_info", []):
            if address.get("family") == "inet":
                return address["local"]
    raise RuntimeError(f"The default route's interface {device} has no IPv4 address.")


def check_free(routes: list[dict[str, Any]] | None = None) -> None:
    """Raises if a route this cluster did not make already covers the pod or service range."""
    routes = _ip_json("route", "show") if routes is None else routes
    ours = {ipaddress.ip_network(POD_CIDR), ipaddress.ip_network(SERVICE_CIDR)}
    for route in routes:
        destination = route.get("dst", "")
        if destination in ("", "default") or route.get("dev") == BRIDGE:
            continue
        network = ipaddress.ip_network(destination, strict=False)
        for wanted in ours:
            if network.overlaps(wanted):
                raise RuntimeError(
                    f"The route {destination} via {route.get('dev')} overlaps the cluster's "
                    f"range {wanted}. Change POD_CIDR or SERVICE_CIDR in dev/kube/network.py "
                    "to a range no interface here uses."
                )


def ensure_bridge() -> list[str]:
    """Makes the pod bridge with the gateway's address, and the resolver's address on it,
    unless they are there; returns what it made.

    The bridge plugin would make the bridge with the first pod; made here, this host has both
    addresses from the start, for the pods' resolver and for the listeners the network tests
    open before any sandbox exists. The plugin takes a bridge it finds whose first address is
    its gateway's, so the resolver's comes second.
    """
    made = []
    prefix = ipaddress.ip_network(POD_CIDR).prefixlen
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{gateway_ip()}/{prefix}", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        made.append(BRIDGE)
    shown = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "dev", BRIDGE], capture_output=True, text=True
    ).stdout
    if f" {RESOLVER_IP}/" not in shown:
        _ip("addr", "add", f"{RESOLVER_IP}/32", "dev", BRIDGE)
        made.append(RESOLVER_IP)
    return made


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


def _ip_json(*args: str) -> list[dict[str, Any]]:
    output = subprocess.run(
        ["ip", "-j", "-4", *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output or "[]")


# What the firewall plugin leaves in iptables once its last pod is gone: its two chains and the
# jump into them. Shared by every network that uses the plugin, so removed only when idle.
FIREWALL_JUMP = ("-m", "comment", "--comment", "CNI firewall plugin rules", "-j", "CNI-FORWARD")
IDLE_FORWARD_CHAIN = [
    "-N CNI-FORWARD",
    '-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN',
]
IDLE_ADMIN_CHAIN = ["-N CNI-ADMIN"]


def firewall_chains_idle(forward_chain: list[str], admin_chain: list[str]) -> bool:
    """Whether the plugin's chains (as ``iptables -S`` lists them) hold no pod's rule."""
    return forward_chain == IDLE_FORWARD_CHAIN and admin_chain == IDLE_ADMIN_CHAIN


def remove_idle_firewall_chains() -> bool:
    """Removes the firewall plugin's chains if no pod of any network still has a rule there."""
    listed = [_iptables("-S", chain) for chain in ("CNI-FORWARD", "CNI-ADMIN")]
    if any(rules is None for rules in listed) or not firewall_chains_idle(*listed):
        return False
    for args in (
        ("-D", "FORWARD", *FIREWALL_JUMP),
        ("-F", "CNI-FORWARD"),
        ("-X", "CNI-FORWARD"),
        ("-X", "CNI-ADMIN"),
    ):
        subprocess.run(["iptables", *args], check=True, capture_output=True)
    return True


def _iptables(*args: str) -> list[str] | None:
    """The rules ``iptables -S`` lists, or None when the chain does not exist."""
    listed = subprocess.run(["iptables", *args], capture_output=True, text=True)
    return listed.stdout.splitlines() if listed.returncode == 0 else None
