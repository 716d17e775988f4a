"""The kernel half of the sidecar: nftables in the network namespace the sandbox shares with it.

Two tables, as the real sidecar keeps two mechanisms apart: the DNS redirect (it uses iptables
`nat OUTPUT`, `pkg/iptables/redirect.go`) and, in dns+nft mode only, the egress filter
(`table inet opensandbox`, `pkg/nftables/manager.go`) (docs/execd-wire.rst, wire-egress-modes).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Iterable

from policy import ALLOW, DENY, IPNetwork, Policy

PROXY_PORT = 15353
# The mark the proxy puts on its own upstream queries (`constants.MarkHex`), so the redirect
# does not loop them back into the proxy and the filter lets them out.
UPSTREAM_MARK = 0x1
FILTER_TABLE = "opensandbox"
REDIRECT_TABLE = "opensandbox_dns"
# `pkg/nftables/dynamic.go`: a learned address outlives its DNS TTL by 60 s, clamped to [60, 360].
DYNAMIC_TTL_SLACK_S, DYNAMIC_TTL_MIN_S, DYNAMIC_TTL_MAX_S = 60, 60, 360


class NftError(RuntimeError):
    pass


def run(script: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True)
    if done.returncode != 0:
        output = done.stderr.strip()
        raise NftError(f"nft apply failed: exit status {done.returncode} (output: {output})")


def redirect_script() -> str:
    """Every UDP and TCP query to port 53 goes to the proxy, except the proxy's own
    (docs/execd-wire.rst, wire-egress-modes)."""
    t = f"inet {REDIRECT_TABLE}"
    return "\n".join(
        [
            f"add table {t}",
            f"add chain {t} output {{ type nat hook output priority -100; }}",
            f"add rule {t} output meta mark {UPSTREAM_MARK:#x} return",
            f"add rule {t} output udp dport 53 redirect to :{PROXY_PORT}",
            f"add rule {t} output tcp dport 53 redirect to :{PROXY_PORT}",
            "",
        ]
    )


def _elements(networks: Iterable[IPNetwork], version: int) -> str:
    # Interval sets refuse overlapping elements, so overlapping targets are merged first, as
    # `normalizeNFTIntervalSet` does.
    same = [n for n in networks if n.version == version]
    return ", ".join(str(n) for n in ipaddress.collapse_addresses(same))


def filter_script(policy: Policy, nameservers: list[str]) -> str:
    """`buildRuleset`: the whole filter, rebuilt on every policy change (dns+nft only).

    Rebuilding also empties the sets of learned addresses, exactly as the sidecar's
    `delete table` + `add table` does: after a PATCH a name must be resolved again.
    """
    t = f"inet {FILTER_TABLE}"
    # `add` first makes the `delete` valid on the first apply too; one `nft -f` is one transaction.
    lines = [f"add table {t}", f"delete table {t}", f"add table {t}"]
    sets = {
        "allow_v4": ("ipv4_addr", policy.networks(ALLOW) + [ipaddress.ip_network("127.0.0.1")], 4),
        "deny_v4": ("ipv4_addr", policy.networks(DENY), 4),
        "allow_v6": ("ipv6_addr", policy.networks(ALLOW), 6),
        "deny_v6": ("ipv6_addr", policy.networks(DENY), 6),
        "nameservers_v4": ("ipv4_addr", [ipaddress.ip_network(ns) for ns in nameservers], 4),
    }
    for name, (kind, networks, version) in sets.items():
        lines.append(f"add set {t} {name} {{ type {kind}; flags interval; }}")
        if elements := _elements(networks, version):
            lines.append(f"add element {t} {name} {{ {elements} }}")
    lines.append(f"add set {t} dyn_allow_v4 {{ type ipv4_addr; timeout {DYNAMIC_TTL_MAX_S}s; }}")
    chain_policy = "drop" if policy.default_action == DENY else "accept"
    hook = f"type filter hook output priority 0; policy {chain_policy};"
    lines.append(f"add chain {t} egress {{ {hook} }}")
    rules = [
        "ct state established,related accept",
        f"meta mark {UPSTREAM_MARK:#x} accept",
        'oifname "lo" accept',
        # DNS over TLS is always blocked, so it cannot bypass the proxy.
        "tcp dport 853 drop",
        "udp dport 853 drop",
        "ip daddr @deny_v4 drop",
        "ip6 daddr @deny_v6 drop",
        "ip daddr @dyn_allow_v4 accept",
        "ip daddr @allow_v4 accept",
        "ip6 daddr @allow_v6 accept",
        # The sidecar's nameservers (resolv.conf's and its upstreams) are allowed on every
        # port, not only 53 (docs/execd-wire.rst, wire-egress-modes).
        "ip daddr @nameservers_v4 accept",
    ]
    if chain_policy == "drop":
        rules.append("counter drop")
    lines.extend(f"add rule {t} egress {rule}" for rule in rules)
    return "\n".join(lines) + "\n"


def _timeout(ttl: int) -> int:
    return min(max(ttl + DYNAMIC_TTL_SLACK_S, DYNAMIC_TTL_MIN_S), DYNAMIC_TTL_MAX_S)


def learned_script(addresses: list[tuple[str, int]]) -> str:
    """Addresses from an allowed answer, added before the answer is returned
    (docs/execd-wire.rst, wire-egress-modes)."""
    elements = ", ".join(f"{address} timeout {_timeout(ttl)}s" for address, ttl in addresses)
    return f"add element inet {FILTER_TABLE} dyn_allow_v4 {{ {elements} }}\n"


def teardown_script(*, with_filter: bool) -> str:
    tables = [REDIRECT_TABLE, FILTER_TABLE] if with_filter else [REDIRECT_TABLE]
    return "".join(f"delete table inet {table}\n" for table in tables)
