"""The egress sidecar enforces network policies in the kernel, proven with real packets.

Each test starts a TCP listener on the Docker bridge address, creates a sandbox through the
real SDK and server, and connects from inside it. "connected" means the listener saw the
connection; "dropped" means the SYN never got an answer (nftables dropped it); "nxdomain" means
the sidecar's DNS proxy refused the name, which our resolver knows (see
test_an_open_sandbox_reaches_the_bridge_by_name_and_by_address).
"""

from __future__ import annotations

import pytest
from opensandbox.models.sandboxes import NetworkRule

from dev.stack.resolver import ALLOWED_NAME, OTHER_NAME, WILDCARD_NAME
from dev.stack.state import ServerInfo, StackState
from tests.network.sandboxes import Listener, allowing, deny_all, reach, sandbox

EGRESS_SERVERS = ["dns_server", "dns_nft_server"]


@pytest.fixture(params=EGRESS_SERVERS)
def egress_server(request: pytest.FixtureRequest) -> ServerInfo:
    return request.getfixturevalue(request.param)


def test_an_open_sandbox_reaches_the_bridge_by_name_and_by_address(
    plain_server: ServerInfo, stack: StackState, zone: dict, listener: Listener
):
    with sandbox(plain_server, stack) as sb:
        outcomes = reach(
            sb,
            (ALLOWED_NAME, listener.port),
            (OTHER_NAME, listener.port),
            (stack.bridge_ip, listener.port),
        )

    assert outcomes == ["connected", "connected", "connected"]
    assert len(listener.peers) == 3


def test_deny_all_refuses_every_name(
    egress_server: ServerInfo, stack: StackState, zone: dict, listener: Listener
):
    with sandbox(egress_server, stack, deny_all()) as sb:
        outcomes = reach(sb, (ALLOWED_NAME, listener.port), (OTHER_NAME, listener.port))

    assert outcomes == ["nxdomain", "nxdomain"]
    assert listener.peers == []


def test_deny_all_still_lets_a_sandbox_reach_its_nameservers_address_on_any_port(
    dns_nft_server: ServerInfo, stack: StackState
):
    # The sidecar allows its nameservers' addresses on every port, not only for DNS: a user whose
    # sandboxes resolve through a host that serves more than DNS should know. Our resolver has an
    # address of its own on the bridge, where this listener is too.
    beside_the_resolver = Listener(stack.resolver["host"])
    try:
        with sandbox(dns_nft_server, stack, deny_all()) as sb:
            outcomes = reach(sb, (stack.resolver["host"], beside_the_resolver.port))
    finally:
        beside_the_resolver.close()

    assert outcomes == ["connected"]
    assert len(beside_the_resolver.peers) == 1


def test_deny_all_drops_packets_to_a_literal_address_with_dns_nft(
    dns_nft_server: ServerInfo, stack: StackState, listener: Listener
):
    with sandbox(dns_nft_server, stack, deny_all()) as sb:
        outcomes = reach(sb, (stack.bridge_ip, listener.port))

    assert outcomes == ["dropped"]
    assert listener.peers == []


def test_dns_mode_filters_names_only_so_a_literal_address_passes_even_deny_all(
    dns_server: ServerInfo, stack: StackState, listener: Listener
):
    # The real sidecar in `dns` mode installs no IP filter at all (`nft.go`: "nftables disabled
    # (dns-only mode)"); the stand-in reproduces that weakness rather than hiding it.
    with sandbox(dns_server, stack, deny_all()) as sb:
        outcomes = reach(sb, (stack.bridge_ip, listener.port))

    assert outcomes == ["connected"]
    assert len(listener.peers) == 1


def test_an_allowlisted_name_is_reachable_and_any_other_name_is_nxdomain(
    egress_server: ServerInfo, stack: StackState, zone: dict, listener: Listener
):
    with sandbox(egress_server, stack, allowing(ALLOWED_NAME)) as sb:
        outcomes = reach(sb, (ALLOWED_NAME, listener.port), (OTHER_NAME, listener.port))

    assert outcomes == ["connected", "nxdomain"]
    assert len(listener.peers) == 1


def test_a_wildcard_rule_allows_names_under_its_suffix_only(
    egress_server: ServerInfo, stack: StackState, zone: dict, listener: Listener
):
    with sandbox(egress_server, stack, allowing("*.wild.test")) as sb:
        outcomes = reach(sb, (WILDCARD_NAME, listener.port), (ALLOWED_NAME, listener.port))

    assert outcomes == ["connected", "nxdomain"]


def test_dns_nft_drops_an_address_until_an_allowed_name_resolves_to_it(
    dns_nft_server: ServerInfo, stack: StackState, zone: dict, listener: Listener
):
    with sandbox(dns_nft_server, stack, allowing(ALLOWED_NAME)) as sb:
        before = reach(sb, (stack.bridge_ip, listener.port))
        by_name = reach(sb, (ALLOWED_NAME, listener.port))
        after = reach(sb, (stack.bridge_ip, listener.port))

    assert before == ["dropped"]
    # The proxy adds the answer's address to the filter before the answer is returned, and
    # from then on the address is open on every port, as with the real sidecar.
    assert by_name == ["connected"]
    assert after == ["connected"]
    assert len(listener.peers) == 2


def test_dns_mode_passes_a_literal_address_outside_the_allowlist(
    dns_server: ServerInfo, stack: StackState, listener: Listener
):
    with sandbox(dns_server, stack, allowing(OTHER_NAME)) as sb:
        outcomes = reach(sb, (stack.bridge_ip, listener.port))

    assert outcomes == ["connected"]


def test_dns_nft_allows_an_allowlisted_cidr_on_any_port(
    dns_nft_server: ServerInfo, stack: StackState, listener: Listener, second_listener: Listener
):
    with sandbox(dns_nft_server, stack, allowing(f"{stack.bridge_ip}/32")) as sb:
        outcomes = reach(
            sb, (stack.bridge_ip, listener.port), (stack.bridge_ip, second_listener.port)
        )
        names = reach(sb, (ALLOWED_NAME, listener.port))

    assert outcomes == ["connected", "connected"]
    assert len(listener.peers) == 1 and len(second_listener.peers) == 1
    # IP and CIDR rules never open a name.
    assert names == ["nxdomain"]


def test_patch_and_delete_change_enforcement_in_a_running_sandbox(
    dns_nft_server: ServerInfo, stack: StackState, listener: Listener
):
    cidr = f"{stack.bridge_ip}/32"
    with sandbox(dns_nft_server, stack, deny_all()) as sb:
        closed = reach(sb, (stack.bridge_ip, listener.port))
        sb.patch_egress_rules([NetworkRule(action="allow", target=cidr)])
        opened = reach(sb, (stack.bridge_ip, listener.port))
        sb.delete_egress_rules([cidr])
        closed_again = reach(sb, (stack.bridge_ip, listener.port))

    assert [closed, opened, closed_again] == [["dropped"], ["connected"], ["dropped"]]
    assert len(listener.peers) == 1


def test_the_sdk_reads_back_the_policy_the_sandbox_was_created_with(
    egress_server: ServerInfo, stack: StackState
):
    policy = allowing(ALLOWED_NAME, f"{stack.bridge_ip}/32")
    with sandbox(egress_server, stack, policy) as sb:
        read_back = sb.get_egress_policy()

    assert read_back == policy
