"""The snapshot registry: where OpenSandbox's controller pushes the pods it commits.

A snapshot on the Kubernetes runtime (a prepared environment, a pause) is a Job the controller
starts on the pod's node: its image-committer commits the pod's containers with ``nerdctl``
through the node's containerd socket and pushes them to the controller's ``--snapshot-registry``.
The committer's image is not built here; ``KUBE_SNAPSHOT_COMMITTER_IMAGE`` names one Docker
has, and only then does the cluster run a registry and the controller its two flags. Unset,
nothing here runs and the controller refuses every snapshot (docs/kubernetes.rst, "What the
tests show").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dev.kube import config, network
from dev.kube.paths import CONFIG_DIR, KUBE_DIR

COMMITTER_VARIABLE = "KUBE_SNAPSHOT_COMMITTER_IMAGE"
PROCESS = "snapshot-registry"
# Beside the stack's package index (18097), on this host's pod-bridge address: the committer
# pushes from a pod, and no pod reaches loopback.
PORT = 18098
ADDRESS = f"{network.gateway_ip()}:{PORT}"
# The repository every snapshot image goes under; the controller names the images in it.
REPOSITORY = f"{ADDRESS}/snapshots"
DATA_DIR = KUBE_DIR / "registry"
CONFIG_FILE = CONFIG_DIR / "registry.json"
# containerd reads a registry's hosts.toml here on every pull, so it may be written after start.
HOSTS_DIR = CONFIG_DIR / "certs.d"


def committer_image() -> str | None:
    """The image-committer image named for the cluster, or None: no snapshots."""
    return os.environ.get(COMMITTER_VARIABLE) or None


def registry_config(data_dir: Path, address: str = ADDRESS) -> dict[str, Any]:
    """Debian's ``docker-registry`` on one address, its blobs in ``data_dir``. Plain HTTP and
    no authentication: only this host and the pods on its bridge reach that address."""
    return {
        "version": "0.1",
        "log": {"level": "info"},
        "storage": {"filesystem": {"rootdirectory": str(data_dir)}, "delete": {"enabled": True}},
        "http": {"addr": address},
    }


def hosts_toml(address: str = ADDRESS) -> dict[str, Any]:
    """containerd's hosts.toml for the registry: plain HTTP, so that the kubelet can pull a
    snapshot back (containerd would otherwise speak HTTPS to any registry but localhost)."""
    return {"server": f"http://{address}"}


def controller_flags(image: str, repository: str = REPOSITORY) -> list[str]:
    """The controller's snapshot flags. Insecure means plain HTTP for the committer's push;
    the committer would guess it from a 10.x address anyway, this says it."""
    return [
        f"--snapshot-registry={repository}",
        "--snapshot-registry-insecure",
        f"--image-committer-image={image}",
    ]


def write_configuration() -> None:
    """The registry's configuration (JSON, which it reads as YAML) and containerd's hosts.toml."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    CONFIG_FILE.write_text(json.dumps(registry_config(DATA_DIR), indent=2) + "\n")
    hosts = HOSTS_DIR / ADDRESS / "hosts.toml"
    hosts.parent.mkdir(parents=True, exist_ok=True)
    hosts.write_text(config.to_toml(hosts_toml()))


def argv() -> list[str]:
    return ["docker-registry", "serve", str(CONFIG_FILE)]
