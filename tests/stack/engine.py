"""The Docker engine: use the one that answers, or install and start one on a Debian machine."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.stack import processes

BRIDGE_IP = "172.17.0.1"
DOCKERD = "dockerd"
# Host programs the stack calls, by the Debian package that provides them. nftables and iproute2
# are here because the egress stand-in's rules are inspected and debugged with them on the host.
HOST_PACKAGES = {
    "dockerd": "docker.io",
    "docker": "docker.io",
    "debootstrap": "debootstrap",
    "nft": "nftables",
    "ip": "iproute2",
}
ENGINE_START_SECONDS = 60


def docker_answers() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def ensure_host_packages() -> list[str]:
    """Installs the Debian packages of missing host programs when it can (root on Debian).

    Elsewhere it leaves them missing: a user with Docker and a built image needs none of them,
    and the step that does need one says which.
    """
    missing = sorted({pkg for prog, pkg in HOST_PACKAGES.items() if not shutil.which(prog)})
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
    """Makes ``docker info`` answer. Returns True when this call started dockerd."""
    if docker_answers():
        return False
    if processes.find(DOCKERD) is None:
        if os.geteuid() != 0:
            raise RuntimeError(
                "Docker does not answer `docker info`. Start the Docker engine (or add your user "
                "to the docker group), or run as root so the stack can start dockerd itself."
            )
        # Containers resolve names only through our resolver on the bridge: the machine's own
        # nameserver is off-machine, and sandboxes must never reach it.
        processes.start(DOCKERD, [DOCKERD, "--dns", BRIDGE_IP])
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


def stop_engine() -> bool:
    """Stops dockerd only if this stack started it."""
    return processes.stop(DOCKERD, grace_seconds=30)
