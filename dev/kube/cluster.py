"""Brings the local cluster up or down: etcd, containerd, the control plane, then the kubelet.

Every process is started by ``PROCESSES`` and remembered there, so ``down`` stops exactly the
processes ``up`` started and nothing else on the machine (Docker's containerd included).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import contextmanager

from dev.kube import (
    api,
    build,
    components,
    config,
    mounts,
    network,
    opensandbox,
    pki,
    runtime,
    sysctls,
)
from dev.kube.paths import (
    ADMIN_KUBECONFIG,
    CNI_CONF_DIR,
    CONFIG_DIR,
    CONTAINERD_SOCKET,
    ETCD_DIR,
    KUBE_DIR,
    KUBELET_DIR,
    LOCK_FILE,
    PKI_DIR,
    POD_RESOLV_CONF,
    PROCESSES,
    STATE_FILE,
)
from dev.stack.engine import ensure_host_packages

# Host programs the cluster runs, by the Debian package that provides them.
HOST_PROGRAMS = {
    "etcd": "etcd-server",
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    str(runtime.CNI_BIN_DIR / "bridge"): "containernetworking-plugins",
    "iptables": "iptables",
    "gcc": "gcc",
}
LAYOUT = components.Layout(PKI_DIR, CONFIG_DIR, ETCD_DIR, KUBELET_DIR)
SYSCTL_RECORD = KUBE_DIR / "sysctls.json"
# Measured on two shared cores: etcd answers in under a second, the apiserver is ready in 3 s,
# the node Ready with its default ServiceAccount 6 s after the kubelet starts. The bounds leave
# room for a machine many times busier (or a first start, when nothing is in the page cache).
ETCD_SECONDS = 30.0
APISERVER_SECONDS = 120.0
NODE_SECONDS = 180.0
POD_DELETE_SECONDS = 120
# The cluster is going away: a pod's own grace period (30 s by default, all of it spent on a
# PID 1 that ignores SIGTERM) would only make `down` slow.
POD_GRACE_SECONDS = 2
# etcd and containerd flush to disk on SIGTERM; none of the processes needs longer.
STOP_GRACE_SECONDS = 30


def up() -> None:
    """Starts whatever part of the cluster is not running; on failure, stops what it started."""
    if os.geteuid() != 0:
        raise RuntimeError(
            "The kubelet and containerd need root (cgroups, mounts, network namespaces). Run "
            "`make kube-up` as root."
        )
    started: list[str] = []
    begin = time.monotonic()
    try:
        _bring_up(started)
    except BaseException:
        for name in reversed(started):
            _stop_process(name)
        if "kubelet" in started:
            sysctls.restore(SYSCTL_RECORD)
            mounts.unmount_under(KUBELET_DIR)
        raise
    state = {
        "apiserver": config.apiserver_url(),
        "kubeconfig": str(ADMIN_KUBECONFIG),
        "node": config.NODE_NAME,
        "pod_cidr": network.POD_CIDR,
        "service_cidr": network.SERVICE_CIDR,
        "containerd_socket": str(CONTAINERD_SOCKET),
        "up_seconds": round(time.monotonic() - begin, 1),
    }
    STATE_FILE.write_text(json.dumps(state, indent=2) + "\n")


def _bring_up(started: list[str]) -> None:
    with _step("host packages") as note:
        note(", ".join(ensure_host_packages(HOST_PROGRAMS)) or "present")
    with _step("kubernetes binaries") as note:
        binaries = build.build()
        note(f"in {next(iter(binaries.values())).parent}")
    node_ip = network.node_ip()
    network.check_free()
    with _step("pod bridge") as note:
        made = network.ensure_bridge()
        note(f"made {', '.join(made)}" if made else "present")
    with _step("certificates and configuration") as note:
        pki.ensure_pki(PKI_DIR, config.NODE_NAME, node_ip, network.service_ip())
        _write_configuration(node_ip)
        note(f"node {config.NODE_NAME} at {node_ip}")
    with _step("etcd") as note:
        if _start("etcd", components.etcd(LAYOUT), started):
            _wait("etcd", _etcd_healthy, ETCD_SECONDS)
        note("started" if "etcd" in started else "running")
    with _step("containerd") as note:
        if runtime.start():
            started.append(runtime.PROCESS)
        note("started" if runtime.PROCESS in started else "running")
        if runtime.ensure_pause_image():
            note(f"(built and imported {config.PAUSE_IMAGE})")
    with _step("control plane") as note:
        _start("kube-apiserver", components.apiserver(LAYOUT, node_ip), started)
        _wait("kube-apiserver", api.ready, APISERVER_SECONDS)
        _start("kube-controller-manager", components.controller_manager(LAYOUT), started)
        _start("kube-scheduler", components.scheduler(LAYOUT), started)
        news = [name for name in components.CONTROL_PLANE if name in started]
        note(("started " + ", ".join(news)) if news else "running")
    with _step("kubelet") as note:
        if PROCESSES.find("kubelet") is None:
            sysctls.save(SYSCTL_RECORD)
        _start("kubelet", components.kubelet(LAYOUT, node_ip), started)
        _wait("kubelet", lambda: _quietly(api.node_ready), NODE_SECONDS, what="the node Ready")
        _wait(
            "kube-controller-manager",
            lambda: _quietly(api.has_default_service_account),
            APISERVER_SECONDS,
            what="the default ServiceAccount",
        )
        note("node Ready, default ServiceAccount made")


def _write_configuration(node_ip: str) -> None:
    CONFIG_DIR.mkdir(parents=True, exist_ok=True)
    identities = {i.file_stem: i.user for i in pki.client_identities(config.NODE_NAME)}
    for stem in ("kubelet", "controller-manager", "scheduler", "admin"):
        kubeconfig = config.kubeconfig(
            PKI_DIR / "ca.crt", PKI_DIR / f"{stem}.crt", PKI_DIR / f"{stem}.key", identities[stem]
        )
        path = ADMIN_KUBECONFIG if stem == "admin" else LAYOUT.kubeconfig(stem)
        path.write_text(json.dumps(kubeconfig, indent=2) + "\n")
        path.chmod(0o600)
    POD_RESOLV_CONF.write_text(config.resolv_conf(network.RESOLVER_IP))
    kubelet = config.kubelet_config(PKI_DIR, CONTAINERD_SOCKET, node_ip, POD_RESOLV_CONF)
    (CONFIG_DIR / "kubelet.json").write_text(json.dumps(kubelet, indent=2) + "\n")
    CNI_CONF_DIR.mkdir(parents=True, exist_ok=True)
    conflist = network.cni_conflist(KUBE_DIR / "cni" / "ipam")
    (CNI_CONF_DIR / "10-opensandbox-kube.conflist").write_text(
        json.dumps(conflist, indent=2) + "\n"
    )


def down() -> list[str]:
    """Stops every process ``up`` recorded, pods first; returns what it did, one line each."""
    # The servers and the controller first, while the apiserver can still remove their sandboxes.
    done = opensandbox.down()
    if PROCESSES.find("kubelet") and PROCESSES.find("kube-apiserver"):
        # The kubelet stops each pod's containers and releases its network; killing the
        # containers behind its back would leave addresses and namespaces behind.
        deleted = subprocess.run(
            [
                components.binary("kubectl"),
                f"--kubeconfig={ADMIN_KUBECONFIG}",
                "delete",
                "pods",
                "--all",
                "--all-namespaces",
                f"--grace-period={POD_GRACE_SECONDS}",
                f"--timeout={POD_DELETE_SECONDS}s",
            ],
            capture_output=True,
            text=True,
        )
        done.append(f"pods: {deleted.stdout.strip() or deleted.stderr.strip() or 'none'}")
    for name in ("kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver"):
        if _stop_process(name):
            done.append(f"stopped {name}")
    if PROCESSES.find(runtime.PROCESS):
        leftovers = runtime.remove_leftover_tasks()
        if leftovers:
            done.append(f"killed containers the kubelet left: {', '.join(leftovers)}")
        _stop_process(runtime.PROCESS)
        done.append("stopped containerd")
    for pid in runtime.stray_shims():
        os.kill(pid, signal.SIGKILL)
        done.append(f"killed shim {pid}")
    if _stop_process("etcd"):
        done.append("stopped etcd")
    unmounted = mounts.unmount_under(KUBE_DIR)
    if unmounted:
        done.append(f"unmounted {len(unmounted)} mount(s) under {KUBE_DIR}")
    # The next `up` starts from an empty cluster: no pod of an earlier run comes back.
    shutil.rmtree(ETCD_DIR, ignore_errors=True)
    changed = sysctls.restore(SYSCTL_RECORD)
    if changed:
        done.append("restored " + ", ".join(f"{k}={v}" for k, v in changed.items()))
    if subprocess.run(["ip", "link", "show", network.BRIDGE], capture_output=True).returncode == 0:
        subprocess.run(["ip", "link", "delete", network.BRIDGE], check=True)
        done.append(f"removed bridge {network.BRIDGE}")
    if network.remove_idle_firewall_chains():
        done.append("removed the CNI firewall plugin's chains")
    STATE_FILE.unlink(missing_ok=True)
    return done


def status() -> str:
    lines = [
        f"apiserver: {config.apiserver_url()}",
        f"kubeconfig: {ADMIN_KUBECONFIG}",
        f"  (export KUBECONFIG={ADMIN_KUBECONFIG}; kubectl is {components.binary('kubectl')})",
        f"containerd socket: {CONTAINERD_SOCKET}",
    ]
    for name in ("etcd", runtime.PROCESS, *components.CONTROL_PLANE, "kubelet"):
        record = PROCESSES.find(name)
        lines.append(f"{name}: {'pid ' + str(record.pid) if record else 'DOWN'}")
    if STATE_FILE.exists():
        lines.append(f"last up took {json.loads(STATE_FILE.read_text())['up_seconds']} s")
    if api.ready():
        lines.append(f"cluster version: {api.version()}")
        ready = _quietly(api.node_ready)
        readiness = {True: "Ready", False: "NotReady", None: "not registered"}[ready]
        lines.append(f"node {config.NODE_NAME}: {readiness}")
    else:
        lines.append("cluster version: unknown (the apiserver does not answer)")
    if PROCESSES.find(runtime.PROCESS):
        lines.append(f"images in containerd's {runtime.NAMESPACE} namespace:")
        lines += [f"  {image}" for image in runtime.images()]
    return "\n".join(lines)


@contextmanager
def lock():
    """Serialises `up` and `down` of several shells sharing one checkout's cluster."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _start(name: str, argv: list[str], started: list[str]) -> bool:
    if PROCESSES.find(name) is not None:
        return False
    PROCESSES.start(name, argv)
    started.append(name)
    return True


def _stop_process(name: str) -> bool:
    return PROCESSES.stop(name, grace_seconds=STOP_GRACE_SECONDS)


def _etcd_healthy() -> bool:
    try:
        with urllib.request.urlopen(f"{components.ETCD_URL}/health", timeout=2) as answer:
            return json.loads(answer.read()).get("health") == "true"
    except OSError:
        return False


def _quietly(check: Callable[[], bool | None]) -> bool | None:
    try:
        return check()
    except OSError:
        return None


def _wait(name: str, check: Callable[[], bool | None], seconds: float, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if PROCESSES.find(name) is None:
            raise RuntimeError(f"{name} exited; read its log, {PROCESSES.log_file(name)}.")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{what or name} was not ready after {seconds:.0f} s; read the log, "
                f"{PROCESSES.log_file(name)}."
            )
        time.sleep(0.5)


@contextmanager
def _step(name: str):
    """Times one step of `up` and prints it, so a slow start shows where the time went."""
    notes: list[str] = []
    begin = time.monotonic()
    yield notes.append
    print(f"kube: {name}: {' '.join(notes)} ({time.monotonic() - begin:.1f} s)", file=sys.stderr)
