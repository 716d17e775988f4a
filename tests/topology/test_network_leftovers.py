"""A celery topology's network left by a killed run is removed by the next; a live one is not.

The network here has names of its own (bridge, namespace, nftables table, claim), so it never
touches the session's topology, which may be up while this runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.airflow_stack import network

BRIDGE = "afctest0"
TABLE = "afctest"
SUBNET_PREFIX = "10.247.32"
# Its last octet names its links (afc99b, afc99n): one the topology's hosts never have.
HOST = network.RemoteHost("afctest-host", f"{SUBNET_PREFIX}.99")

# Makes the network in a process of its own, starts a process on its host, prints that
# process's PID and waits to be killed, as a `make demo` killed mid-run would.
_MAKER = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from dev.airflow_stack import network
    network.BRIDGE, network.NFT_TABLE = sys.argv[1], sys.argv[2]
    network.SUBNET_PREFIX, network.BRIDGE_IP = sys.argv[3], sys.argv[3] + ".1"
    network.CLAIM = Path(sys.argv[4])
    host = network.RemoteHost(sys.argv[5], sys.argv[6])
    network.create(Path(sys.argv[7]), [host])
    guest = subprocess.Popen(["ip", "netns", "exec", host.namespace, "sleep", "600"])
    print(guest.pid, flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def own_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setattr(network, "BRIDGE", BRIDGE)
    monkeypatch.setattr(network, "NFT_TABLE", TABLE)
    monkeypatch.setattr(network, "SUBNET_PREFIX", SUBNET_PREFIX)
    monkeypatch.setattr(network, "BRIDGE_IP", f"{SUBNET_PREFIX}.1")
    monkeypatch.setattr(network, "CLAIM", tmp_path / "claim")
    yield tmp_path
    # Whatever a failed assertion left.
    network._release_claim()
    network._remove_network([HOST.namespace])


def _exists(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True).returncode == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_killed_runs_network_is_removed_by_the_next_and_a_live_ones_is_refused(
    own_names: Path,
) -> None:
    maker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _MAKER,
            BRIDGE,
            TABLE,
            SUBNET_PREFIX,
            str(network.CLAIM),
            HOST.name,
            HOST.address,
            str(own_names / "killed"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        guest = int(maker.stdout.readline())
        with pytest.raises(RuntimeError, match="Another celery topology is running"):
            network.create(own_names / "second", [HOST])
        assert _exists("ip", "link", "show", BRIDGE), "a refused start removed a live network"
        assert _alive(guest)
    finally:
        maker.send_signal(signal.SIGKILL)
        maker.wait()
    # Killed: its network and the process on its host outlive it.
    assert _exists("ip", "link", "show", BRIDGE)
    assert _alive(guest)

    hosts = network.create(own_names / "third", [HOST])

    assert not _alive(guest)
    assert f"{HOST.address}\t{HOST.name}" in hosts.read_text()
    assert _exists("ip", "netns", "exec", HOST.namespace, "true")
    assert _exists("nft", "list", "table", "inet", TABLE)
    assert network.remove(own_names / "third")
    assert not _exists("ip", "link", "show", BRIDGE)
    assert not _exists("ip", "netns", "exec", HOST.namespace, "true")
    assert not _exists("nft", "list", "table", "inet", TABLE)
