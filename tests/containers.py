"""A sandbox's containers as the Docker engine shows them, and real faults made on them.

The execd stand-in has a test-only switch that stalls its streams; the real execd has none. A
sandbox whose container is frozen (``docker pause``, the cgroup freezer) is a real stall that
any execd shows the same way: the connection stays open, the kernel still acknowledges, and no
byte, heartbeat or terminal event comes while the container is frozen. With
``RUNTIME=kubernetes`` the sandbox's containers are the cluster containerd's tasks of its pod,
frozen with ``ctr tasks pause``.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from dev.kube import opensandbox
from dev.kube.runtime import ctr
from dev.stack.state import runtime

# How long a command may take to appear in its container's process list.
START_SECONDS = 30.0
# How long a destroyed sandbox's containers may take to go: Docker removes them within a
# second or two once the server answers, on a loaded machine within seconds more.
REMOVAL_SECONDS = 15.0
# On Kubernetes the pod is deleted with its termination grace period (the default, 30 s): a
# pod that takes the SIGTERM is gone in about 2 s, but a frozen one cannot take it, and the
# kubelet kills it only when that period ends (31 s measured).
POD_GRACE_SECONDS = 30.0


def assert_no_container(sandbox: str) -> None:
    """Fails unless every container of ``sandbox`` is gone within the runtime's time to
    remove them."""
    grace = POD_GRACE_SECONDS if runtime() == "kubernetes" else 0.0
    deadline = time.monotonic() + REMOVAL_SECONDS + grace
    while (left := containers_of(sandbox)) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not left, f"sandbox {sandbox} left containers behind: {left}"


def containers_of(sandbox: str) -> list[str]:
    """The names of a sandbox's containers (with an egress sidecar there are two): on
    Kubernetes, those of its pod while the pod exists, terminating or not."""
    if runtime() == "kubernetes":
        return [
            c["name"] for pod in opensandbox.pods_of(sandbox) for c in pod["spec"]["containers"]
        ]
    listed = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=opensandbox.io/id={sandbox}"]
        + ["--format", "{{.Names}}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return listed.stdout.split()


def wait_until_running(container: str, process: str) -> None:
    """Returns once ``process`` shows in the container's process list, so that a fault made next
    lands mid-command and not before the command has started."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        top = subprocess.run(["docker", "top", container], capture_output=True, text=True)
        if process in top.stdout:
            return
        time.sleep(0.2)
    pytest.fail(f"{process!r} never started in container {container}")


def freeze(container: str) -> None:
    subprocess.run(["docker", "pause", container], check=True, capture_output=True)


def run_frozen(sandbox: str, marker: str, call: Callable[[], Any]) -> Any:
    """Runs ``call`` (a command whose line holds ``marker``) on a thread, freezes the sandbox's
    containers once the command runs, and returns what ``call`` returned."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the test thread as it is
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    if runtime() == "kubernetes":
        _freeze_pod(sandbox, marker)
    else:
        containers = containers_of(sandbox)
        wait_until_running(_main(containers), marker)
        for container in containers:
            freeze(container)
    # The backend notices a silent stream within its 10 s stall window and destroys the sandbox;
    # two minutes is long past that, so a call still running then hangs.
    thread.join(120)
    if thread.is_alive():
        pytest.fail(f"the call on frozen sandbox {sandbox} did not come back within 120 s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _main(containers: list[str]) -> str:
    """The sandbox's own container, not its egress sidecar (the server names it ...-egress)."""
    main = [name for name in containers if "egress" not in name]
    return main[0] if main else containers[0]


def _freeze_pod(sandbox: str, process: str) -> None:
    """Freezes every container of the sandbox's pod once ``process`` runs in its own one."""
    tasks = {
        status["name"]: status["containerID"].removeprefix("containerd://")
        for pod in opensandbox.pods_of(sandbox)
        for status in pod.get("status", {}).get("containerStatuses", [])
        if status.get("containerID")
    }
    own = [task for name, task in tasks.items() if "egress" not in name]
    if not own:
        pytest.fail(f"sandbox {sandbox} has no running container in the cluster: {tasks!r}")
    deadline = time.monotonic() + START_SECONDS
    while not any(process in _cmdline(pid) for pid in _task_pids(own[0])):
        if time.monotonic() > deadline:
            pytest.fail(f"{process!r} never started in sandbox {sandbox}'s container {own[0]}")
        time.sleep(0.2)
    for task in tasks.values():
        ctr("tasks", "pause", task)


def _task_pids(task: str) -> list[int]:
    rows = ctr("tasks", "ps", task).splitlines()[1:]
    return [int(row.split()[0]) for row in rows if row.strip()]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
