"""The celery topology's network: a bridge of ours, and a network namespace per remote host.

Each namespace has one veth pair whose other end is on the bridge, an address of the bridge's
subnet, and no default route, so its processes reach the bridge's own address (where the root
namespace's components listen) and the other namespaces, and nothing else: a packet for any
other address has no route and is never sent.

Every process of the topology runs with the hosts file written here bound over /etc/hosts in a
mount namespace of its own, so each host's name resolves on the machine itself: Airflow records
a task's host by name, and the api-server fetches a running task's log from that name; looked up
anywhere else, the name would go to the machine's nameserver.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BRIDGE = "afcelery0"
# A /24 of the private range that neither Docker's default bridge (172.17.0.0/16) nor the
# reliability tests' worker namespaces (10.199.0.0/16) use.
SUBNET_PREFIX = "10.247.31"
PREFIX_LENGTH = 24
BRIDGE_IP = f"{SUBNET_PREFIX}.1"
NFT_TABLE = "afcelery"
# Held (flock) by the process that made the network, for as long as the network is up: the
# kernel lets go of it when that process dies, however it dies, so a bridge found with the claim
# free is the leftover of a run that was killed, not a topology that is running.
CLAIM = Path("/run/lock") / f"{BRIDGE}.claim"
# SIGKILL takes effect at once; the bound only keeps a stuck kill from hanging a stop.
KILL_WAIT_SECONDS = 10.0

# Binds the hosts file ($1) over /etc/hosts, names the host ($2, unless empty) and runs the rest.
_ENTER = 'mount --bind "$1" /etc/hosts && { [ -z "$2" ] || hostname "$2"; } && shift 2 && exec "$@"'


def _ip(*argv: str) -> None:
    result = subprocess.run(["ip", *argv], capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"`ip {' '.join(argv)}` failed: {result.stderr.strip()}")


@dataclass(frozen=True)
class RemoteHost:
    """A host of the topology in a network namespace of its own, named as its processes see it."""

    name: str
    address: str

    @property
    def namespace(self) -> str:
        return self.name

    @property
    def _link(self) -> str:
        # Interface names are at most 15 characters; the host's name may be longer.
        return f"afc{self.address.rsplit('.', 1)[1]}"

    @property
    def bridge_link(self) -> str:
        return f"{self._link}b"

    @property
    def inner_link(self) -> str:
        return f"{self._link}n"


def numbered(role: str, count: int, first_address: int) -> tuple[RemoteHost, ...]:
    """``count`` hosts ``airflow-<role>-1`` and on, from the subnet's ``first_address`` up."""
    return tuple(
        RemoteHost(f"airflow-{role}-{n}", f"{SUBNET_PREFIX}.{first_address + n - 1}")
        for n in range(1, count + 1)
    )


def hosts_file(home: Path) -> Path:
    """The machine's hosts file and a line for each host of the topology."""
    return home / "run" / "hosts"


def _marker(home: Path) -> Path:
    # Written once the bridge is up: the network is this home's to remove.
    return home / "run" / "network"


def create(home: Path, remote_hosts: Sequence[RemoteHost]) -> Path:
    """Make the bridge, the namespaces and the hosts file; returns the hosts file.

    A network that a killed run left behind is removed first; one whose maker still runs is
    refused.
    """
    _take_claim(remote_hosts)
    (home / "run").mkdir(parents=True, exist_ok=True)
    _ip("link", "add", BRIDGE, "type", "bridge")
    _marker(home).write_text("\n".join(host.namespace for host in remote_hosts) + "\n")
    _ip("addr", "add", f"{BRIDGE_IP}/{PREFIX_LENGTH}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    _guard_bridge_address()
    for host in remote_hosts:
        _ip("netns", "add", host.namespace)
        _ip("link", "add", host.bridge_link, "type", "veth", "peer", "name", host.inner_link)
        _ip("link", "set", host.inner_link, "netns", host.namespace)
        _ip("link", "set", host.bridge_link, "master", BRIDGE, "up")
        inside = ("-n", host.namespace)
        _ip(*inside, "addr", "add", f"{host.address}/{PREFIX_LENGTH}", "dev", host.inner_link)
        _ip(*inside, "link", "set", host.inner_link, "up")
        _ip(*inside, "link", "set", "lo", "up")
    lines = [f"{host.address}\t{host.name}" for host in remote_hosts]
    hosts_file(home).write_text(Path("/etc/hosts").read_text() + "\n".join(lines) + "\n")
    return hosts_file(home)


def _guard_bridge_address() -> None:
    """Take connections to the bridge's address only from the bridge and from this host.

    The address is the host's own, so without this rule a sandbox on the Docker bridge could
    reach it too: the database, the broker, and the forward to the OpenSandbox servers, which
    listen on loopback because their sandbox proxy route asks for no API key.
    """
    rules = f"""
table inet {NFT_TABLE} {{
  chain input {{
    type filter hook input priority 0;
    ip daddr {BRIDGE_IP} iifname != {{ "{BRIDGE}", "lo" }} drop
  }}
}}
"""
    result = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"nft refused the bridge address's guard: {result.stderr.strip()}")


def remove(home: Path) -> bool:
    """Remove the namespaces and the bridge this home made (deleting a namespace deletes its
    veth pair); True if there was any."""
    marker = _marker(home)
    if not marker.exists():
        return False
    _remove_network(marker.read_text().split())
    hosts_file(home).unlink(missing_ok=True)
    marker.unlink()
    _release_claim()
    return True


# The open claim of this process's network, if it made one.
_claim_fd: int | None = None


def _take_claim(remote_hosts: Sequence[RemoteHost]) -> None:
    global _claim_fd
    fd = os.open(CLAIM, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(
            f"Another celery topology is running (the process that made the bridge {BRIDGE} "
            "is alive). Stop it (Ctrl-C in its `make demo TOPOLOGY=celery`, or the end of its "
            "test session) and start this one again."
        ) from None
    left_behind = os.read(fd, 4096).decode().split()
    # What a killed run left: its network is nobody's now.
    _remove_network([*left_behind, *(host.namespace for host in remote_hosts)])
    os.ftruncate(fd, 0)
    os.pwrite(fd, "".join(f"{host.namespace}\n" for host in remote_hosts).encode(), 0)
    _claim_fd = fd


def _release_claim() -> None:
    global _claim_fd
    if _claim_fd is not None:
        os.close(_claim_fd)
        _claim_fd = None


def _remove_network(namespaces: Sequence[str]) -> None:
    """Remove a network of this module's: its hosts' processes, namespaces, the bridge and its
    guard. Names only this module gives, so nothing else is touched."""
    existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    present = {line.split()[0] for line in existing.splitlines() if line.strip()}
    for namespace in dict.fromkeys(namespaces):
        if namespace in present:
            # Deleting a namespace ends none of its processes: a task process that outlived
            # its worker would live on, cut off.
            kill_processes(namespace)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
    subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], capture_output=True)


def kill_processes(namespace: str) -> list[int]:
    """SIGKILL every process in ``namespace`` at once, as a host that is lost ends them; returns
    their PIDs once all are gone.

    A worker's task processes lead process groups of their own, so signalling the worker's
    group would leave them running; the namespace holds them all.
    """
    killed: set[int] = set()
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while pids := _pids(namespace):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            killed.add(pid)
        for pid in killed:
            try:
                os.waitpid(pid, os.WNOHANG)  # a child of this process stays a zombie until reaped
            except ChildProcessError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"Processes {pids} in namespace {namespace} survived SIGKILL.")
        time.sleep(0.1)
    return sorted(killed)


def _pids(namespace: str) -> list[int]:
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
    return [int(pid) for pid in listed.stdout.split()]


def command(hosts_file: Path, argv: list[str], host: RemoteHost | None = None) -> list[str]:
    """``argv`` run with the topology's hosts file, and inside ``host``'s namespace, under its
    name, when one is given. Every program here execs the next, so the PID stays argv's."""
    if host is None:
        return ["unshare", "--mount", "sh", "-c", _ENTER, "sh", str(hosts_file), "", *argv]
    inside = ["ip", "netns", "exec", host.namespace, "unshare", "--mount", "--uts"]
    return [*inside, "sh", "-c", _ENTER, "sh", str(hosts_file), host.name, *argv]
