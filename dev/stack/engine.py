"""The Docker engine: use the one that answers, or install and start one on a Debian machine."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from dev.stack import processes

BRIDGE_IP = "172.17.0.1"
# The resolver's own address on the bridge, apart from the gateway address where the tests'
# listeners are: the egress sidecar lets a sandbox reach its nameservers' addresses on every
# port (docs/execd-wire.rst, wire-egress-modes), so on one shared address no test could show a
# packet to a listener dropped.
RESOLVER_IP = "172.17.255.254"
# Keeps the engine's container addresses in the lower half of the bridge, clear of RESOLVER_IP.
FIXED_CIDR = "172.17.0.0/17"
BRIDGE = "docker0"
DOCKERD = "dockerd"
# Host programs the stack calls, by the Debian package that provides them. nftables and iproute2
# are here because the egress stand-in's rules are inspected and debugged with them on the host;
# redis-server keeps the warm pools' state; docker-registry and htpasswd serve the tests' private
# images (dev/stack/registry.py).
HOST_PACKAGES = {
    "dockerd": "docker.io",
    "docker": "docker.io",
    "debootstrap": "debootstrap",
    "nft": "nftables",
    "ip": "iproute2",
    "redis-server": "redis-server",
    "docker-registry": "docker-registry",
    "htpasswd": "apache2-utils",
}
ENGINE_START_SECONDS = 60


def docker_answers() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def ensure_host_packages(programs: dict[str, str] = HOST_PACKAGES) -> list[str]:
    """Installs the Debian packages of missing host programs when it can (root on Debian).

    ``programs`` maps a program (a name on PATH, or a path) to its package; the local
    Kubernetes cluster passes its own. Elsewhere it leaves them missing: a user with Docker and
    a built image needs none of them, and the step that does need one says which.
    """
    missing = sorted({pkg for prog, pkg in programs.items() if not shutil.which(prog)})
    return install_debian_packages(missing)


def install_debian_packages(missing: list[str]) -> list[str]:
    """Installs ``missing`` with apt-get when it can (root on Debian); returns what it installed."""
    if not missing or os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        return []
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return missing


def ensure_engine() -> bool:
    """Makes ``docker info`` answer. Returns True when this call started dockerd.

    A dockerd this stack started earlier with other options (an older resolver address) is
    restarted; an engine someone else runs is used as it is.
    """
    ours = processes.find(DOCKERD)
    if ours is not None and ours.fingerprint != _fingerprint():
        processes.stop(DOCKERD, grace_seconds=30)
        ours = None
    if docker_answers():
        return False
    if ours is None:
        if os.geteuid() != 0:
            raise RuntimeError(
                "Docker does not answer `docker info`. Start the Docker engine (or add your user "
                "to the docker group), or run as root so the stack can start dockerd itself."
            )
        # Containers resolve names only through our resolver on the bridge: the machine's own
        # nameserver is off-machine, and sandboxes must never reach it.
        processes.start(DOCKERD, _dockerd_argv(), fingerprint=_fingerprint())
        started = True
    else:
        started = False  # a dockerd we started earlier is still coming up
    deadline = time.monotonic() + ENGINE_START_SECONDS
    while not docker_answers():
        if processes.find(DOCKERD) is None or time.monotonic() > deadline:
            raise RuntimeError(
                f"dockerd did not answer within {ENGINE_START_SECONDS} s; its log is "
                f"{processes.log_file(DOCKERD)}."
            )
        time.sleep(0.5)
    return started


def ensure_resolver_address() -> bool:
    """Puts RESOLVER_IP on the bridge, where containers (told it by dockerd) look for it.

    True if this call added it. Without root it is left to whoever runs the engine.
    """
    shown = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "dev", BRIDGE], capture_output=True, text=True
    )
    if f" {RESOLVER_IP}/" in shown.stdout or os.geteuid() != 0:
        return False
    subprocess.run(
        ["ip", "addr", "add", f"{RESOLVER_IP}/32", "dev", BRIDGE], check=True, capture_output=True
    )
    return True


def _dockerd_argv() -> list[str]:
    return [DOCKERD, "--dns", RESOLVER_IP, "--fixed-cidr", FIXED_CIDR]


def _fingerprint() -> str:
    return " ".join(_dockerd_argv())


def stop_engine() -> bool:
    """Stops dockerd only if this stack started it."""
    return processes.stop(DOCKERD, grace_seconds=30)
