"""The policy in force, and how a change reaches the kernel, after `commitPolicy`
(docs/execd-wire.rst, wire-egress-patch)."""

from __future__ import annotations

import sys
import threading

import nft
from policy import Policy

DNS_ONLY = "dns"
DNS_NFT = "dns+nft"


def parse_enforcement_mode(raw: str) -> str:
    """`ParseEgressMode`: `dns` is required, `nft` optional, `+`-joined in any order
    (docs/execd-wire.rst, wire-egress-modes)."""
    tokens = {t.strip() for t in raw.strip().lower().split("+") if t.strip()} or {"dns"}
    if not tokens <= {"dns", "nft"} or "dns" not in tokens:
        print(f"invalid OPENSANDBOX_EGRESS_MODE={raw!r}; falling back to dns", file=sys.stderr)
        return DNS_ONLY
    return DNS_NFT if "nft" in tokens else DNS_ONLY


class LivePolicy:
    def __init__(self, initial: Policy, enforcement_mode: str, nameservers: list[str]) -> None:
        self.policy = initial
        self.enforcement_mode = enforcement_mode
        self._nameservers = nameservers
        # One change at a time, so a PATCH cannot lose a concurrent DELETE (`policyServer.mu`).
        self.lock = threading.Lock()

    @property
    def uses_nft(self) -> bool:
        return self.enforcement_mode == DNS_NFT

    def commit(self, new: Policy) -> None:
        """The kernel first, then the proxy's view; raises NftError and keeps the old policy."""
        if self.uses_nft:
            nft.run(nft.filter_script(new, self._nameservers))
        self.policy = new

    def learn(self, addresses: list[tuple[str, int]]) -> None:
        try:
            nft.run(nft.learned_script(addresses))
        except nft.NftError as exc:
            # The sidecar only warns here; the client then fails to connect, as it would there.
            print(f"[dns] add resolved IPs to nft failed: {exc}", file=sys.stderr)
