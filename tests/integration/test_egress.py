"""Egress fails closed (SPEC 2): the policy matrix on the stack's three servers, with real packets.

Packets go only to a listener this test binds on the Docker bridge address, by that address
or by a name of the stack's resolver, which resolves to it.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections.abc import Iterator

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from dev.stack.resolver import ALLOWED_NAME, OTHER_NAME
from dev.stack.state import StackState
from tests.integration.conftest import Sandbox
from tests.network.sandboxes import Listener

# Long enough for a SYN to an answering host on this machine, so a timeout means a drop.
CONNECT_TIMEOUT = 3

# Runs in the sandbox: one word per target, so a drop, a refusal and an unknown name differ.
PROBE = """
import json, socket, sys
def reach(host, port):
    try:
        address = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    except socket.gaierror:
        return "no-name"
    try:
        socket.create_connection(address, timeout=float(sys.argv[1])).close()
        return "connected"
    except OSError:
        return "dropped"
print(json.dumps([reach(host, port) for host, port in json.loads(sys.argv[2])]))
"""


def reach(sandbox, *targets: tuple[str, int]) -> list[str]:
    command = shlex.join(["python3", "-c", PROBE, str(CONNECT_TIMEOUT), json.dumps(targets)])
    result = sandbox.run(command, timeout=60)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def listener(stack: StackState) -> Iterator[Listener]:
    bound = Listener(stack.bridge_ip)
    yield bound
    bound.close()


def test_an_open_spec_sends_no_policy_so_a_server_without_the_sidecar_runs_it(
    sandbox_on, plain_server, stack, listener
) -> None:
    sandbox = sandbox_on(plain_server, SandboxSpec(block_network=False))
    assert reach(sandbox, (stack.bridge_ip, listener.port)) == ["connected"]


def test_deny_all_on_a_server_without_the_sidecar_is_refused_with_the_servers_words(
    backend_on, plain_server, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="opensandbox_provider")
    with pytest.raises(SandboxTerminalError) as raised:
        backend_on(plain_server).create(spec=SandboxSpec())
    message = str(raised.value)
    assert "egress.image must be configured when networkPolicy is provided" in message
    assert "HTTP 400" in message and "block_network=False" in message
    # The server refused the create itself, so there is no sandbox to clean up.
    assert not [record for record in caplog.records if "Created OpenSandbox" in record.getMessage()]


def test_deny_all_behind_a_sidecar_that_filters_names_only_is_destroyed_and_refused(
    backend_on, dns_server
) -> None:
    with pytest.raises(SandboxTerminalError) as raised:
        backend_on(dns_server).create(spec=SandboxSpec())
    message = str(raised.value)
    assert "'dns' mode" in message and '[egress] mode = "dns+nft"' in message
    refused = re.search(r"on sandbox (\S+), so it was destroyed", message)
    assert refused is not None, message
    assert not dns_server.has_sandbox(refused.group(1))


def test_deny_all_enforced_at_the_address_layer_is_accepted_and_drops_packets(
    sandbox_on, dns_nft_server, stack, listener
) -> None:
    sandbox = sandbox_on(dns_nft_server, SandboxSpec())
    outcomes = reach(sandbox, (stack.bridge_ip, listener.port), (ALLOWED_NAME, listener.port))
    assert outcomes == ["dropped", "no-name"]
    assert listener.peers == []


def test_an_allowlist_reaches_its_hosts_and_nothing_else(
    sandbox_on, dns_nft_server, listener
) -> None:
    sandbox = sandbox_on(dns_nft_server, SandboxSpec(allow_egress_to=[ALLOWED_NAME]))
    outcomes = reach(sandbox, (ALLOWED_NAME, listener.port), (OTHER_NAME, listener.port))
    assert outcomes == ["connected", "no-name"]
    assert len(listener.peers) == 1


def test_an_allowlist_without_block_network_is_refused(backend_on, plain_server) -> None:
    spec = SandboxSpec(block_network=False, allow_egress_to=[ALLOWED_NAME])
    with pytest.raises(SandboxTerminalError, match="block_network=True"):
        backend_on(plain_server).create(spec=spec)


def test_deny_all_keeps_dropping_packets_command_after_command(
    sandbox_on, dns_nft_server, stack, listener
) -> None:
    sandbox = sandbox_on(dns_nft_server, SandboxSpec())
    for _ in range(3):
        assert reach(sandbox, (stack.bridge_ip, listener.port)) == ["dropped"]
    assert dns_nft_server.has_sandbox(sandbox.handle)


def test_an_attached_sandbox_keeps_the_policy_its_creator_proved(
    backend_on, dns_nft_server, stack, listener
) -> None:
    owner = "egress_dag/manual__2026-01-01T00:00:00+00:00"
    creator = backend_on(dns_nft_server)
    handle = creator.create(spec=SandboxSpec(owner=owner))
    try:
        attacher = backend_on(dns_nft_server)
        attacher.attach(handle, owner=owner, holder=f"{owner}/agent[0]")
        sandbox = Sandbox(attacher, handle, dns_nft_server)
        # The attacher reads no policy (its creator may have run guest code already); the one
        # proven at create still holds.
        assert reach(sandbox, (stack.bridge_ip, listener.port)) == ["dropped"]
        assert listener.peers == []
    finally:
        creator.destroy(handle)
