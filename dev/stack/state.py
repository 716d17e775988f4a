"""``.stack/state.json``: what a running stack offers, written by ``up`` and read by the tests.

The file names the servers (with their API key), the sandbox image, the bridge address and the
resolver's zone, so tests never hard-code a port or a key. With ``RUNTIME=kubernetes`` the tests
and benchmarks read ``.kube/stack-state.json`` instead: the same description of the Kubernetes-mode
servers on the local cluster (docs/kubernetes.rst, "OpenSandbox on the local cluster").
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dev.kube.paths import SERVER_STATE_FILE
from dev.stack.paths import HOST_MOUNTS_DIR, STATE_FILE

if TYPE_CHECKING:
    from opensandbox.config.connection_sync import ConnectionConfigSync

CONN_TYPE = "opensandbox"


@dataclass(frozen=True)
class ServerInfo:
    """One OpenSandbox server of the stack, and how a client reaches it."""

    name: str
    host: str
    port: int
    api_key: str
    egress_mode: str | None
    # Extras every Airflow connection to this server carries: the local cluster's servers ask
    # for small resource requests, so its one node holds the suite's sandboxes.
    connection_extra: dict[str, str] = field(default_factory=dict)

    @property
    def domain(self) -> str:
        return f"{self.host}:{self.port}"

    def connection_config(self, **overrides: Any) -> ConnectionConfigSync:
        """A fresh SDK connection config: each SandboxSync owns and closes its transport."""
        from opensandbox.config.connection_sync import ConnectionConfigSync

        options = {"domain": self.domain, "api_key": self.api_key, "protocol": "http"}
        return ConnectionConfigSync(**{**options, **overrides})

    def has_sandbox(self, handle: str) -> bool:
        """Whether the server still knows the sandbox: the end of every destroy test."""
        from opensandbox import SandboxManagerSync

        manager = SandboxManagerSync.create(self.connection_config())
        try:
            manager.get_sandbox_info(handle)
        except Exception as e:
            if getattr(e, "status_code", None) == 404:
                return False
            raise
        finally:
            manager.close()
        return True

    def airflow_connection_env(self, conn_id: str, **extra: Any) -> dict[str, str]:
        """The environment variable that defines an Airflow connection to this server."""
        connection = {
            "conn_type": CONN_TYPE,
            "host": self.host,
            "port": self.port,
            "schema": "http",
            "password": self.api_key,
        }
        extra = {**self.connection_extra, **extra}
        if extra:
            connection["extra"] = extra
        return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(connection)}


@dataclass(frozen=True)
class StackState:
    servers: dict[str, ServerInfo]
    sandbox_image: str
    bridge_ip: str
    resolver: dict[str, Any] = field(default_factory=dict)
    # Role (sandbox, execd, egress) -> the image serving it, and whether that image is our
    # stand-in or one named at `up` (dev/stack/images.py).
    images: dict[str, str] = field(default_factory=dict)
    image_kinds: dict[str, str] = field(default_factory=dict)
    # Where warm pools keep their state (dev/stack/redis.py); empty from a stack that predates it.
    redis_url: str = ""
    # The host directory the servers let a sandbox mount ([storage] allowed_host_paths).
    host_mounts: str = str(HOST_MOUNTS_DIR)
    # Whether the servers can take a snapshot: the Docker runtime always can; the Kubernetes
    # runtime only when its controller has a registry to push the pod to (dev/kube/snapshots.py).
    snapshots: bool = True

    def runs_named(self, role: str) -> bool:
        """Whether ``role`` is served by a named image rather than our stand-in."""
        return self.image_kinds.get(role) == "named"

    def to_json(self) -> str:
        servers = {name: _without_name(asdict(info)) for name, info in self.servers.items()}
        return json.dumps({**asdict(self), "servers": servers}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> StackState:
        data = json.loads(text)
        servers = {name: ServerInfo(name=name, **info) for name, info in data["servers"].items()}
        return cls(
            servers,
            data["sandbox_image"],
            data["bridge_ip"],
            data["resolver"],
            data.get("images", {}),
            data.get("image_kinds", {}),
            data.get("redis_url", ""),
            data.get("host_mounts", str(HOST_MOUNTS_DIR)),
            data.get("snapshots", True),
        )


def runtime() -> str:
    """The runtime whose servers ``read_state`` describes: ``RUNTIME``, Docker by default."""
    return os.environ.get("RUNTIME", "").strip() or "docker"


def read_state(runtime_name: str | None = None) -> StackState:
    name = runtime_name or runtime()
    if name == "kubernetes":
        try:
            return StackState.from_json(SERVER_STATE_FILE.read_text())
        except FileNotFoundError:
            raise RuntimeError(
                "The Kubernetes-mode OpenSandbox servers are not up (no .kube/stack-state.json). "
                "Start them with `make kube-server-up` (as root), then run the tests again."
            ) from None
    if name != "docker":
        raise RuntimeError(f"RUNTIME={name} is not a runtime here; use docker or kubernetes.")
    try:
        return StackState.from_json(STATE_FILE.read_text())
    except FileNotFoundError:
        raise RuntimeError(
            "The local OpenSandbox stack is not up (no .stack/state.json). "
            "Start it with `make stack-up`, then run the tests again."
        ) from None


def write_state(state: StackState) -> None:
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    # Written beside it and renamed over it: the suite's workers read it while `make demo`,
    # run by one of them, writes it again, and must never read half of it.
    written = STATE_FILE.with_name(f".{STATE_FILE.name}.{os.getpid()}")
    written.write_text(state.to_json())
    written.chmod(0o600)  # it holds the API key
    written.replace(STATE_FILE)


def remove_state() -> None:
    STATE_FILE.unlink(missing_ok=True)


def _without_name(info: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items() if key != "name"}
