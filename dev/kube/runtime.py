"""The cluster's own containerd: started beside Docker's, sharing nothing with it.

Its socket, root, state and runc root are under ``.kube/containerd``, so neither containerd
ever sees the other's containers. ``ctr`` talks to it through the socket, in the ``k8s.io``
namespace the CRI plugin keeps the kubelet's images and containers in.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from dev.kube import config, pause, snapshots
from dev.kube.paths import (
    CNI_CONF_DIR,
    CONFIG_DIR,
    CONTAINERD_DIR,
    CONTAINERD_SOCKET,
    IMAGES_DIR,
    PROCESSES,
)

PROCESS = "containerd"
NAMESPACE = "k8s.io"
CNI_BIN_DIR = Path("/usr/lib/cni")
START_SECONDS = 30.0
# A killed task can be deleted once it has exited, normally within milliseconds; one still there
# after this long is stuck in the kernel, and its shim is killed once containerd has stopped.
KILL_WAIT_SECONDS = 10.0


def ctr(*args: str, stdin=None, check: bool = True) -> str:
    return subprocess.run(
        ["ctr", "--address", str(CONTAINERD_SOCKET), "--namespace", NAMESPACE, *args],
        check=check,
        stdin=stdin,
        capture_output=True,
        text=stdin is None,
    ).stdout


def start() -> bool:
    """Starts our containerd unless it runs; True if this call started it."""
    if PROCESSES.find(PROCESS) is not None:
        return False
    CONFIG_DIR.mkdir(parents=True, exist_ok=True)
    config_file = CONFIG_DIR / "containerd.toml"
    # Read at start only: a cluster started without the committer's image cannot pull a
    # snapshot back from the registry (one committed on this node is in its containerd already).
    hosts = snapshots.HOSTS_DIR if snapshots.committer_image() else None
    config_file.write_text(
        config.to_toml(config.containerd_config(CONTAINERD_DIR, CNI_CONF_DIR, CNI_BIN_DIR, hosts))
    )
    PROCESSES.start(PROCESS, ["containerd", "--config", str(config_file)])
    deadline = time.monotonic() + START_SECONDS
    while not _answers():
        if PROCESSES.find(PROCESS) is None or time.monotonic() > deadline:
            raise RuntimeError(
                f"containerd did not come up; read its log, {PROCESSES.log_file(PROCESS)}."
            )
        time.sleep(0.2)
    return True


def _answers() -> bool:
    try:
        ctr("version")
    except subprocess.CalledProcessError:
        return False
    return True


def images() -> list[str]:
    """The image references in the k8s.io namespace, as the CRI plugin and kubelet see them."""
    names = ctr("images", "list", "--quiet").splitlines()
    # The CRI plugin also lists every image under its bare digest; those add nothing here.
    return sorted(name for name in names if name and not name.startswith("sha256:"))


def has_image(reference: str) -> bool:
    # containerd stores a short name in full form (registry and repository path added), so a
    # short name matches the tail of the stored one.
    return any(name == reference or name.endswith("/" + reference) for name in images())


def import_archive(archive) -> None:
    """Imports a ``docker save`` archive (a file object) into the kubelet's namespace."""
    ctr("images", "import", "-", stdin=archive)


def ensure_pause_image() -> bool:
    """Builds and imports the pause image unless containerd has it; True if it was imported."""
    if has_image(config.PAUSE_IMAGE):
        return False
    binary = pause.compile_pause(IMAGES_DIR)
    archive = IMAGES_DIR / "pause.tar"
    archive.write_bytes(pause.image_archive(binary.read_bytes()))
    with archive.open("rb") as handle:
        import_archive(handle)
    return True


def remove_leftover_tasks() -> list[str]:
    """Kills and deletes every task the kubelet left running; returns their ids.

    ``down`` asks the kubelet to stop every pod first, which also releases their network; this
    is for a pod it could not stop, so that no container process outlives the cluster.
    """
    leftovers = [line.split()[0] for line in ctr("tasks", "list").splitlines()[1:] if line.strip()]
    for task in leftovers:
        ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    for task in leftovers:
        while time.monotonic() < deadline:
            try:
                ctr("tasks", "delete", task)
                break
            except subprocess.CalledProcessError:
                time.sleep(0.2)
    return leftovers


def stray_shims() -> list[int]:
    """PIDs of shims still serving our containerd after it stopped.

    A shim detaches from containerd when it starts, so stopping containerd leaves it running;
    it names our containerd's socket on its command line, which no other shim does.
    """
    address = str(CONTAINERD_SOCKET).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"containerd-shim-runc-v2") and address in argv:
            pids.append(int(entry.name))
    return pids


def load_docker_image(reference: str) -> None:
    """``docker save REFERENCE | ctr images import -``: a Docker image, runnable by the kubelet
    without a registry (give the pod ``imagePullPolicy: Never`` or a tag other than latest)."""
    if PROCESSES.find(PROCESS) is None:
        raise RuntimeError("The cluster's containerd is not running. Run `make kube-up` first.")
    save = subprocess.Popen(["docker", "save", reference], stdout=subprocess.PIPE)
    try:
        import_archive(save.stdout)
    finally:
        save.stdout.close()
        if save.wait() != 0:
            raise RuntimeError(
                f"`docker save {reference}` failed; check the image exists (`docker images`)."
            )
