"""OpenSandbox on the local cluster: its controller, its CRDs and servers in Kubernetes mode.

OpenSandbox's controller is not published in a form this repository can fetch, so it is built
by hand and named by two variables: ``KUBE_CONTROLLER_BIN`` (the controller's binary) and
``KUBE_CRDS_DIR`` (its ``config/crd/bases`` folder). The servers are the Docker stack's pinned
``opensandbox-server`` with a configuration written from the server's own Kubernetes example,
and ``.kube/stack-state.json`` describes them in the stack's format, so that the tests find
them when ``RUNTIME=kubernetes`` (``dev/stack/state.py``). A fourth server, on agent-sandbox's
workload, runs when its controller is named too (``dev/kube/agent_sandbox.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dev.kube import (
    agent_sandbox,
    api,
    components,
    config,
    ingress,
    network,
    runtime,
    snapshots,
)
from dev.kube.paths import ADMIN_KUBECONFIG, CONTAINERD_SOCKET, KUBE_DIR, PROCESSES, REPO
from dev.kube.paths import SERVER_STATE_FILE as STATE_FILE
from dev.stack import servers as stack_servers
from dev.stack import task_sdk_image, wheelhouse
from dev.stack.engine import ensure_host_packages
from dev.stack.images import image_id
from dev.stack.paths import SERVER_VENV
from dev.stack.resolver import DEFAULT_ZONE
from dev.stack.state import ServerInfo, StackState, read_state

NAMESPACE = "opensandbox"
CONTROLLER = "opensandbox-controller"
# Loopback only, and off the controller's default :8081, which another service may hold.
CONTROLLER_HEALTH = "127.0.0.1:18181"
HOST = "127.0.0.1"
# The pod network's gateway on the bridge: the address a pod reaches this host at.
BRIDGE_IP = network.gateway_ip()
# Our resolver for the pods (the kubelet names it in every pod's resolv.conf): the network
# tests' names resolve to the gateway, where their listeners wait, and nothing else resolves.
RESOLVER = "kube-resolver"
RESOLVER_PORT = 53
ZONE = dict.fromkeys(DEFAULT_ZONE, BRIDGE_IP)
# The Docker stack's package index, served again where the zone's names lead a pod.
WHEELHOUSE = "kube-wheelhouse"
CONTROLLER_SECONDS = 60.0
SERVER_SECONDS = 60.0
DELETE_SECONDS = 120
EXAMPLE = "examples/example.config.k8s.toml"


@dataclass(frozen=True)
class KubeServer:
    """One OpenSandbox server in Kubernetes mode; the ports sit beside the Docker stack's."""

    name: str
    port: int
    egress_mode: str | None
    # The server's kubernetes.workload_provider: the resource each sandbox is made of.
    workload: str = "batchsandbox"
    # How a client that leaves the server's proxy off reaches a sandbox: the pod's own address
    # ("direct", the server's default) or OpenSandbox's ingress gateway ("gateway").
    ingress: str = "direct"

    @property
    def connection_extra(self) -> dict[str, str]:
        # Through the gateway only when the server's proxy is off: with it on, every call
        # would go through the server whatever its ingress mode.
        gateway = {"use_server_proxy": "false"} if self.ingress == "gateway" else {}
        return {**SANDBOX_REQUESTS, **gateway}

    @property
    def slug(self) -> str:
        return self.name.replace("+", "-")

    @property
    def process_name(self) -> str:
        return f"opensandbox-server-{self.slug}"

    @property
    def directory(self) -> Path:
        return KUBE_DIR / "servers" / self.slug


# The one host directory every server lets a pod mount: the node is this machine.
HOST_MOUNTS = KUBE_DIR / "host-mounts"
# What each sandbox asks the scheduler for, through the connections the tests and benchmarks
# make (the connection's cpu_request and memory_request extras): the limits stay the
# backend's (1 CPU, 2 GiB by default), and as requests they would let the two-core node
# hold two sandboxes.
SANDBOX_REQUESTS = {"cpu_request": "100m", "memory_request": "128Mi"}

SERVERS = (
    KubeServer("plain", 18093, None),
    KubeServer("dns", 18094, "dns"),
    KubeServer("dns+nft", 18095, "dns+nft"),
)
# Started only when agent-sandbox's controller is named (dev/kube/agent_sandbox.py).
AGENT_SANDBOX_SERVER = KubeServer("agent-sandbox", 18096, None, agent_sandbox.WORKLOAD)
# Started only when the ingress gateway is named (dev/kube/ingress.py): beside the plain
# server, so one benchmark run measures the server's proxy, the gateway and the pod direct.
GATEWAY_SERVER = KubeServer("gateway", 18100, None, ingress="gateway")
EVERY_SERVER = (*SERVERS, AGENT_SANDBOX_SERVER, GATEWAY_SERVER)


def servers_to_run(agent: bool, gateway: bool) -> tuple[KubeServer, ...]:
    """The servers ``up`` starts: with ``KUBE_ROUTE=gateway``, the suite's three in gateway mode."""
    suite = SERVERS
    if ingress.route() == "gateway":
        suite = tuple(dataclasses.replace(server, ingress="gateway") for server in SERVERS)
    extra = (AGENT_SANDBOX_SERVER,) if agent else ()
    return (*suite, *extra, *((GATEWAY_SERVER,) if gateway else ()))


def up() -> StackState:
    """Starts the controller and the servers not running; the cluster must be up."""
    if PROCESSES.find("kube-apiserver") is None or not api.ready():
        raise RuntimeError("The local cluster is not running. Run `make kube-up` first.")
    controller, crds = _controller_paths()
    agent = agent_sandbox.configured()
    gateway = ingress.configured()
    servers = servers_to_run(agent is not None, gateway is not None)
    docker_stack = read_state("docker")
    for image in _images_to_load(docker_stack):
        # Loaded on every `up`: the stack may have rebuilt a stand-in since the last one.
        runtime.load_docker_image(image)
    kubectl("apply", "--server-side", "-f", str(crds))
    if not _namespace_exists():
        kubectl("create", "namespace", NAMESPACE)
    _wait(
        lambda: api.has_default_service_account(NAMESPACE),
        CONTROLLER_SECONDS,
        f"The namespace {NAMESPACE} has no default ServiceAccount",
        "kube-controller-manager",
    )
    committer = snapshots.committer_image()
    if committer:
        _ensure_snapshot_registry(committer)
    argv = controller_argv(controller, committer)
    running = PROCESSES.find(CONTROLLER)
    if running is not None and running.argv != argv:
        # Started with or without the snapshot flags before; the flags are read at start only.
        PROCESSES.stop(CONTROLLER)
        running = None
    if running is None:
        PROCESSES.start(CONTROLLER, argv)
    _wait(
        lambda: _answers(f"http://{CONTROLLER_HEALTH}/healthz"),
        CONTROLLER_SECONDS,
        "The OpenSandbox controller is not healthy",
        CONTROLLER,
    )
    if agent:
        _start_agent_sandbox_controller(*agent)
    if gateway:
        _start_gateway(gateway)
    if PROCESSES.find(RESOLVER) is None:
        _start_resolver()
    if PROCESSES.find(WHEELHOUSE) is None:
        argv = [sys.executable, "-m", "http.server", "--bind", BRIDGE_IP, "--directory"]
        PROCESSES.start(WHEELHOUSE, [*argv, str(wheelhouse.DIRECTORY), str(wheelhouse.PORT)])
    key = stack_servers.api_key()
    for server in servers:
        _ensure_server(server, key, docker_stack.images)
    for server in servers:
        _wait(
            lambda port=server.port: _answers(f"http://{HOST}:{port}/health"),
            SERVER_SECONDS,
            f"The {server.name!r} Kubernetes-mode server is not healthy on port {server.port}",
            server.process_name,
        )
    state = StackState(
        servers={
            s.name: ServerInfo(s.name, HOST, s.port, key, s.egress_mode, s.connection_extra)
            for s in servers
        },
        sandbox_image=docker_stack.sandbox_image,
        bridge_ip=BRIDGE_IP,
        resolver={"host": network.RESOLVER_IP, "port": RESOLVER_PORT, "zone": ZONE},
        images=docker_stack.images,
        image_kinds=docker_stack.image_kinds,
        # The Docker stack's Redis, on loopback: warm pools' state is kept by this host's
        # processes (keepers, schedulers), whichever runtime makes their sandboxes.
        redis_url=docker_stack.redis_url,
        host_mounts=str(HOST_MOUNTS),
        snapshots=committer is not None,
    )
    STATE_FILE.write_text(state.to_json())
    STATE_FILE.chmod(0o600)  # it holds the API key
    return state


def down() -> list[str]:
    """Deletes every sandbox, then stops the servers and the controller; one line per step."""
    done = []
    if PROCESSES.find(CONTROLLER) and api.ready():
        # The controller removes a BatchSandbox's finalizer and its pods; it must still run.
        done.append(_delete_every("batchsandboxes"))
    if PROCESSES.find(agent_sandbox.CONTROLLER) and api.ready():
        done.append(_delete_every(agent_sandbox.RESOURCE))
    servers = [s.process_name for s in EVERY_SERVER]
    stopped = [agent_sandbox.CONTROLLER, CONTROLLER, ingress.PROCESS, RESOLVER, WHEELHOUSE]
    stopped.append(snapshots.PROCESS)
    for name in servers + stopped:
        if PROCESSES.stop(name):
            done.append(f"stopped {name}")
    STATE_FILE.unlink(missing_ok=True)
    return done


def status() -> str:
    lines = [f"{CONTROLLER}: {_pid(CONTROLLER)}"]
    where = f"{network.RESOLVER_IP}:{RESOLVER_PORT}"
    lines.append(f"resolver for pods ({where}): {_pid(RESOLVER)}")
    index = f"{BRIDGE_IP}:{wheelhouse.PORT}"
    lines.append(f"package index for pods ({index}): {_pid(WHEELHOUSE)}")
    agent = PROCESSES.find(agent_sandbox.CONTROLLER) is not None
    if agent:
        where = agent_sandbox.CONTROLLER_HEALTH
        lines.append(f"{agent_sandbox.CONTROLLER} ({where}): {_pid(agent_sandbox.CONTROLLER)}")
    else:
        lines.append(
            "agent-sandbox: not running (`up` starts its controller and server only when "
            "AGENT_SANDBOX_CONTROLLER_BIN and AGENT_SANDBOX_CRDS_DIR are set)"
        )
    if snapshots.committer_image():
        lines.append(f"snapshot registry ({snapshots.ADDRESS}): {_pid(snapshots.PROCESS)}")
    gateway = PROCESSES.find(ingress.PROCESS) is not None
    if gateway:
        lines.append(f"{ingress.PROCESS} ({ingress.ADDRESS}): {_pid(ingress.PROCESS)}")
    for server in servers_to_run(agent, gateway):
        egress = f", egress {server.egress_mode}" if server.egress_mode else ""
        egress += ", through the gateway" if server.ingress == "gateway" else ""
        lines.append(
            f"server {server.name} (http://{HOST}:{server.port}{egress}): "
            f"{_pid(server.process_name)}; log {PROCESSES.log_file(server.process_name)}"
        )
    if api.ready() and PROCESSES.find(CONTROLLER):
        resources = f"batchsandboxes,{agent_sandbox.RESOURCE}" if agent else "batchsandboxes"
        lines.append(kubectl("get", f"{resources},pods", "-n", NAMESPACE, "-o", "wide"))
    return "\n".join(lines)


def controller_argv(controller: Path, committer: str | None) -> list[str]:
    """The controller's command line; with the committer's image, its snapshot flags too."""
    argv = [
        str(controller),
        f"--kubeconfig={ADMIN_KUBECONFIG}",
        f"--health-probe-bind-address={CONTROLLER_HEALTH}",
        "--metrics-bind-address=0",
        f"--containerd-socket-path={CONTAINERD_SOCKET}",
    ]
    return argv + snapshots.controller_flags(committer) if committer else argv


def batchsandboxes() -> set[str]:
    """The names of the BatchSandboxes in the servers' namespace: one per sandbox."""
    return set(kubectl("get", "batchsandboxes", "-n", NAMESPACE, "-o", "name").split())


def server_config(
    server: KubeServer, key: str, images: dict[str, str], example: dict[str, Any]
) -> dict[str, Any]:
    """The server's Kubernetes example, pointed at this cluster, its images and our port."""
    example = copy.deepcopy(example)
    example["server"].update(host=HOST, port=server.port, api_key=key)
    example["runtime"]["execd_image"] = images["execd"]
    example["kubernetes"].update(
        kubeconfig_path=str(ADMIN_KUBECONFIG),
        namespace=NAMESPACE,
        workload_provider=server.workload,
    )
    # The example names a template file in HOME that nobody wrote; without one the server
    # builds the BatchSandbox from the request alone.
    del example["kubernetes"]["batchsandbox_template_file"]
    example["store"]["path"] = str(server.directory / "home" / "opensandbox.db")
    example["storage"]["allowed_host_paths"] = [str(HOST_MOUNTS)]
    if server.ingress == "gateway":
        example["ingress"] = ingress.server_ingress()
    if server.egress_mode:
        example["egress"].update(image=images["egress"], mode=server.egress_mode)
    else:
        del example["egress"]  # no sidecar: the server refuses network policies
    return example


def pods_of(sandbox: str) -> list[dict[str, Any]]:
    """The pods the runtime made for ``sandbox`` (one), as the API server shows them."""
    shown = kubectl(
        "get", "pods", "-n", NAMESPACE, "-l", f"opensandbox.io/id={sandbox}", "-o", "json"
    )
    return list(json.loads(shown)["items"])


def kubectl(*args: str, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(
        [components.binary("kubectl"), f"--kubeconfig={ADMIN_KUBECONFIG}", *args],
        capture_output=True,
        text=True,
        input=stdin,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"`kubectl {' '.join(args)}` failed: {result.stderr.strip()}")
    return result.stdout or result.stderr


def _ensure_server(server: KubeServer, key: str, images: dict[str, str]) -> None:
    example = tomllib.loads((_site_packages() / EXAMPLE).read_text())
    text = config.to_toml(server_config(server, key, images, example))
    config_path = server.directory / "config.toml"
    running = PROCESSES.find(server.process_name)
    if running is not None and config_path.exists() and config_path.read_text() == text:
        return
    if running is not None:
        PROCESSES.stop(server.process_name)
    (server.directory / "home").mkdir(parents=True, exist_ok=True)
    HOST_MOUNTS.mkdir(parents=True, exist_ok=True)
    config_path.write_text(text)
    config_path.chmod(0o600)  # it holds the API key
    env = {**os.environ, "HOME": str(server.directory / "home")}
    env.pop("OPENSANDBOX_SERVER_API_KEY", None)  # it would override the key in the config
    argv = [str(SERVER_VENV / "bin" / "opensandbox-server"), "--config", str(config_path)]
    PROCESSES.start(server.process_name, argv, env=env)


def _delete_every(resource: str) -> str:
    deleted = kubectl(
        "delete", resource, "--all", "-n", NAMESPACE, f"--timeout={DELETE_SECONDS}s", check=False
    )
    return f"{resource}: {deleted.strip() or 'none'}"


def _start_agent_sandbox_controller(binary: Path, crds: Path) -> None:
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(agent_sandbox.crds(crds)))
    if PROCESSES.find(agent_sandbox.CONTROLLER) is None:
        PROCESSES.start(
            agent_sandbox.CONTROLLER, agent_sandbox.controller_argv(binary, ADMIN_KUBECONFIG)
        )
    _wait(
        lambda: _answers(f"http://{agent_sandbox.CONTROLLER_HEALTH}/healthz"),
        CONTROLLER_SECONDS,
        "The agent-sandbox controller is not healthy",
        agent_sandbox.CONTROLLER,
    )


def _start_gateway(binary: Path) -> None:
    argv = ingress.argv(binary)
    running = PROCESSES.find(ingress.PROCESS)
    if running is not None and running.argv != argv:
        PROCESSES.stop(ingress.PROCESS)
        running = None
    if running is None:
        PROCESSES.start(ingress.PROCESS, argv, env=ingress.environment(ADMIN_KUBECONFIG))
    _wait(
        lambda: _answers(ingress.HEALTH),
        CONTROLLER_SECONDS,
        "OpenSandbox's ingress gateway is not healthy",
        ingress.PROCESS,
    )


def _ensure_snapshot_registry(committer: str) -> None:
    """The registry the committer pushes to, and the committer's image in the node's
    containerd: the controller's Job names it with ``IfNotPresent``, and nothing is pullable."""
    ensure_host_packages({"docker-registry": "docker-registry"})
    snapshots.write_configuration()
    if PROCESSES.find(snapshots.PROCESS) is None:
        PROCESSES.start(snapshots.PROCESS, snapshots.argv())
    _wait(
        lambda: _answers(f"http://{snapshots.ADDRESS}/v2/"),
        CONTROLLER_SECONDS,
        f"The snapshot registry does not answer on {snapshots.ADDRESS}",
        snapshots.PROCESS,
    )
    runtime.load_docker_image(committer)


def _images_to_load(docker_stack: StackState) -> list[str]:
    """The Docker stack's images (sandbox, execd, egress), and the OpenSandboxExecutor's Task
    SDK image where the stack built it: the executor's tries run in it here too."""
    loaded = list(dict.fromkeys(docker_stack.images.values()))
    if image_id(task_sdk_image.TAG) is not None:
        loaded.append(task_sdk_image.TAG)
    return loaded


def _start_resolver() -> None:
    # The cluster's `up` put its address on the pod bridge (dev/kube/network.py).
    zone = [arg for name, ip in ZONE.items() for arg in ("--zone", f"{name}={ip}")]
    argv = [sys.executable, "-m", "dev.stack.resolver", "--bind", network.RESOLVER_IP]
    argv += ["--port", str(RESOLVER_PORT), *zone]
    PROCESSES.start(RESOLVER, argv, cwd=REPO)


def _controller_paths() -> tuple[Path, Path]:
    controller = Path(os.environ.get("KUBE_CONTROLLER_BIN", ""))
    crds = Path(os.environ.get("KUBE_CRDS_DIR", ""))
    if not controller.name or not os.access(controller, os.X_OK):
        raise RuntimeError(
            "Set KUBE_CONTROLLER_BIN to OpenSandbox's controller binary (built from the "
            "kubernetes/ folder of OpenSandbox's repository); it is not built here."
        )
    if not crds.name or not any(crds.glob("*.yaml")):
        raise RuntimeError(
            "Set KUBE_CRDS_DIR to the controller's CRD folder (kubernetes/config/crd/bases in "
            "OpenSandbox's repository, of the same commit as the controller)."
        )
    return controller, crds


def _site_packages() -> Path:
    found = sorted((SERVER_VENV / "lib").glob("python3*/site-packages/opensandbox_server"))
    if not found:
        raise RuntimeError(
            f"The OpenSandbox server is not installed in {SERVER_VENV}. Run `make stack-up` "
            "once; it installs the pinned server there."
        )
    return found[0]


def _namespace_exists() -> bool:
    try:
        api.get(f"/api/v1/namespaces/{NAMESPACE}")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise
    return True


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def _wait(check, seconds: float, what: str, process: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if PROCESSES.find(process) is None:
            raise RuntimeError(f"{process} exited; read its log, {PROCESSES.log_file(process)}.")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{what} after {seconds:.0f} s; read the log, {PROCESSES.log_file(process)}."
            )
        time.sleep(0.5)


def _pid(name: str) -> str:
    record = PROCESSES.find(name)
    return f"pid {record.pid}" if record else "DOWN"
