"""Egress to IPv4 ranges: accepted only where dns+nft enforcement is proven, checked with packets.

Every packet goes to the test's own TCP listener on the Docker bridge address; the ranges
that must stay closed are proven closed by allowing a different range, never by sending
anything anywhere else.
"""

from __future__ import annotations

import ipaddress
import shlex
import uuid
from collections.abc import Iterator

import pytest
from airflow.providers.common.ai.sandbox.base import (
    NETWORK_TAG,
    OWNER_TAG,
    SandboxSpec,
    SandboxTerminalError,
    decode_network_policy,
)
from opensandbox import SandboxManagerSync
from opensandbox.models.sandboxes import SandboxFilter

from dev.stack.state import ServerInfo, StackState
from opensandbox_provider import _tags
from tests.integration.conftest import Sandbox
from tests.network.sandboxes import Listener

# A documentation range (RFC 5737): allowed in a policy, never connected to.
ELSEWHERE = "203.0.113.0/24"
OWNER = "cidr_dag/manual__2026-01-01T00:00:00+00:00"
# Runs in the sandbox: connect straight to an address, no name lookup, and say what happened.
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("connected")
except OSError as e:
    print("dropped" if isinstance(e, TimeoutError) or e.errno == 1 else f"error {e.errno}")
"""


@pytest.fixture
def listener(stack: StackState) -> Iterator[Listener]:
    bound = Listener(stack.bridge_ip)
    yield bound
    bound.close()


def sandboxes_owned_by(server: ServerInfo, owner: str) -> set[str]:
    """The sandboxes on ``server`` stamped with ``owner``, found as an operator would."""
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        page = manager.list_sandbox_infos(
            SandboxFilter(metadata=_tags.encode({OWNER_TAG: owner}), page_size=200)
        )
    finally:
        manager.close()
    return {info.id for info in page.sandbox_infos}


def reach(sandbox: Sandbox, listener: Listener) -> str:
    command = f"python3 -c {shlex.quote(PROBE)} {listener.host} {listener.port}"
    result = sandbox.run(command, timeout=30)
    assert result.exit_code == 0, result
    return result.stdout.strip()


def cidrs(*ranges: str, hosts: tuple[str, ...] = ()) -> SandboxSpec:
    return SandboxSpec(allow_egress_to=list(hosts) or None, allow_egress_to_cidrs=list(ranges))


def test_an_allowed_range_is_reachable(sandbox_on, dns_nft_server, stack, listener):
    sandbox = sandbox_on(dns_nft_server, cidrs(f"{stack.bridge_ip}/32"))

    assert reach(sandbox, listener) == "connected"
    assert listener.peers


def test_an_allowed_range_is_reachable_on_any_port(sandbox_on, dns_nft_server, stack, listener):
    other_port = Listener(stack.bridge_ip)
    try:
        # The /16 the listeners' address is in: Docker's bridge range, or the cluster's.
        wide = ipaddress.ip_network(f"{stack.bridge_ip}/16", strict=False)
        sandbox = sandbox_on(dns_nft_server, cidrs(str(wide)))

        assert [reach(sandbox, listener), reach(sandbox, other_port)] == ["connected"] * 2
    finally:
        other_port.close()


def test_an_address_outside_the_allowed_ranges_stays_dropped(sandbox_on, dns_nft_server, listener):
    sandbox = sandbox_on(dns_nft_server, cidrs(ELSEWHERE))

    assert reach(sandbox, listener) == "dropped"
    assert listener.peers == []


def test_ranges_and_host_names_are_allowed_together(sandbox_on, dns_nft_server, stack, listener):
    sandbox = sandbox_on(dns_nft_server, cidrs(f"{stack.bridge_ip}/32", hosts=("allowed.test",)))

    assert reach(sandbox, listener) == "connected"


def test_the_ranges_are_stamped_for_an_attaching_task(backend_on, dns_nft_server, stack):
    backend = backend_on(dns_nft_server)
    owner = f"{OWNER}-{uuid.uuid4().hex}"
    ranges = [f"{stack.bridge_ip}/32", ELSEWHERE]
    handle = backend.create(spec=SandboxSpec(allow_egress_to_cidrs=ranges, owner=owner))
    try:
        stamped = decode_network_policy(backend.read_tags(handle)[NETWORK_TAG])
        # The same owner filter the refusal tests rely on finds a sandbox that exists.
        found = sandboxes_owned_by(dns_nft_server, owner)
    finally:
        backend.destroy(handle)

    assert stamped == SandboxSpec(allow_egress_to_cidrs=ranges)
    assert found == {handle}


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ("dns_server", r"'dns' mode.*\[egress\] mode = \"dns\+nft\""),
        ("plain_server", r"\[egress\] with mode dns\+nft"),
    ],
    ids=["sidecar-filters-names-only", "no-egress-sidecar"],
)
def test_ranges_are_refused_with_what_to_configure_where_addresses_are_not_filtered(
    backend_on, stack, request, server, problem
):
    target = request.getfixturevalue(server)
    owner = f"{OWNER}-{uuid.uuid4().hex}"
    spec = SandboxSpec(allow_egress_to_cidrs=[f"{stack.bridge_ip}/32"], owner=owner)

    with pytest.raises(SandboxTerminalError, match=problem):
        backend_on(target).create(spec=spec)

    assert sandboxes_owned_by(target, owner) == set()


@pytest.mark.parametrize(
    ("ranges", "problem"),
    [
        (["172.17.0.1/16"], "host bits set"),
        (["fd00::/8"], "IPv4"),
        (["0.0.0.0/0"], "every address"),
        (["not-an-address"], "not an IPv4 range"),
        ("172.17.0.1/32", "must be a list"),
    ],
)
def test_a_range_that_is_not_a_usable_ipv4_network_is_refused_before_anything_is_created(
    backend_on, dns_nft_server: ServerInfo, ranges, problem
):
    owner = f"{OWNER}-{uuid.uuid4().hex}"

    with pytest.raises(SandboxTerminalError, match=problem):
        backend_on(dns_nft_server).create(
            spec=SandboxSpec(allow_egress_to_cidrs=ranges, owner=owner)
        )

    assert sandboxes_owned_by(dns_nft_server, owner) == set()


def test_ranges_on_an_open_sandbox_are_refused(backend_on, dns_nft_server, stack):
    backend = backend_on(dns_nft_server)

    with pytest.raises(SandboxTerminalError, match="block_network=False"):
        backend.create(
            spec=SandboxSpec(block_network=False, allow_egress_to_cidrs=[f"{stack.bridge_ip}/32"])
        )
