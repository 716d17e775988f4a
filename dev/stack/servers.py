"""The three OpenSandbox servers the tests choose from, each with its own config, HOME and log.

All three share one Docker engine. The server treats every container labelled
``opensandbox.io/id`` as its own (it lists them, and expires them at start-up), so each server
also sees the others' sandboxes. That is harmless here: the three start together, before any
test runs, tests address sandboxes by id, and every sandbox they create has a timeout long past
the run. A server a test starts mid-run is given a ``docker_host`` of its own instead
(tests/engine_view.py says why).
"""

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from dev.stack import images, processes
from dev.stack.paths import (
    API_KEY_FILE,
    HOST_MOUNTS_DIR,
    SERVER_REQUIREMENTS,
    SERVER_VENV,
    STACK_DIR,
)

HOST = "127.0.0.1"
SERVER_VERSION = "1.1.1"
HEALTH_WAIT_SECONDS = 60
# Each sandbox takes two or three host ports; the server insists on a range of at least 100.
PORTS_PER_SERVER = 200
FIRST_SANDBOX_PORT = 41000


@dataclass(frozen=True)
class ServerSpec:
    name: str
    port: int
    egress_mode: str | None  # None: no [egress] section, so network policies are refused
    index: int

    @property
    def slug(self) -> str:
        return self.name.replace("+", "-")

    @property
    def directory(self):
        return STACK_DIR / "servers" / self.slug

    @property
    def process_name(self) -> str:
        return f"server-{self.slug}"

    def config(self, api_key: str, choice: images.ImageChoice) -> str:
        low = FIRST_SANDBOX_PORT + self.index * PORTS_PER_SERVER
        text = f"""\
# Written by `python -m dev.stack up`; regenerated on every start.
[server]
host = "{HOST}"  # loopback only: the sandbox proxy route needs no API key
port = {self.port}
api_key = "{api_key}"
max_sandbox_timeout_seconds = 86400

[log]
level = "INFO"

[runtime]
type = "docker"
execd_image = "{choice.image("execd")}"

[docker]
network_mode = "bridge"  # the default, host, makes every sandbox's execd share one port
publish_host = "{HOST}"
port_range_min = {low}
port_range_max = {low + PORTS_PER_SERVER - 1}

[ingress]
mode = "direct"

[store]
type = "sqlite"
path = "{self.directory / "home" / "opensandbox.db"}"

[storage]
allowed_host_paths = ["{HOST_MOUNTS_DIR}"]  # the volume tests mount directories under it
"""
        if self.egress_mode:
            text += f"""
[egress]
image = "{choice.image("egress")}"
mode = "{self.egress_mode}"
"""
        return text


SERVERS = (
    ServerSpec("plain", 18090, None, 0),
    ServerSpec("dns", 18091, "dns", 1),
    ServerSpec("dns+nft", 18092, "dns+nft", 2),
)


def api_key() -> str:
    """The stack's API key: random, made once per machine, never committed."""
    if not API_KEY_FILE.exists():
        API_KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
        API_KEY_FILE.write_text(secrets.token_urlsafe(24))
        API_KEY_FILE.chmod(0o600)
    return API_KEY_FILE.read_text().strip()


def ensure_server_venv() -> bool:
    """Installs the pinned server in its own venv (its pins clash with Airflow's). True if done."""
    stamp = SERVER_VENV / ".synced"
    wanted = hashlib.sha256(SERVER_REQUIREMENTS.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return False
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("Installing the OpenSandbox server needs uv; run `make setup` first.")
    venv, python, pins = str(SERVER_VENV), str(SERVER_VENV / "bin" / "python"), SERVER_REQUIREMENTS
    subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", "python3", venv], check=True)
    # Compiled now, once, rather than by three servers at their first start.
    sync = [uv, "pip", "sync", "-q", "--compile-bytecode", "--python", python, str(pins)]
    subprocess.run(sync, check=True)
    stamp.write_text(wanted)
    return True


def launch_servers(key: str, choice: images.ImageChoice) -> list[tuple[ServerSpec, bool]]:
    """Launches every server not running with its current config and execd image.

    The server copies the execd files out of its image once per process, so a server started
    before the execd image changed is restarted. Returns (server, was it running before) for
    each launch; the servers come up side by side, so wait with ``wait_healthy``.
    """
    launched = []
    for spec in SERVERS:
        restarted = ensure_server(spec, key, choice)
        if restarted is not None:
            launched.append((spec, restarted))
    return launched


def ensure_server(
    spec: ServerSpec, key: str, choice: images.ImageChoice, docker_host: str | None = None
) -> bool | None:
    """Launches ``spec`` unless it already runs with this key, config and execd image, and
    reaching the Docker engine at ``docker_host`` (the environment's when None).

    Returns None when it was left running, else whether an older process was stopped first.
    """
    config = spec.config(key, choice)
    HOST_MOUNTS_DIR.mkdir(parents=True, exist_ok=True)
    execd = images.image_id(choice.image("execd")) or ""
    fingerprint = _fingerprint(config, execd, docker_host or "")
    running = processes.find(spec.process_name)
    if running is not None and running.fingerprint == fingerprint:
        return None
    if running is not None:
        processes.stop(spec.process_name)
    _launch(spec, config, fingerprint, docker_host)
    return running is not None


def wait_healthy(specs: list[ServerSpec]) -> None:
    for spec in specs:
        _wait_healthy(spec)


def stop_server(spec: ServerSpec) -> bool:
    return processes.stop(spec.process_name)


def is_running(spec: ServerSpec) -> bool:
    return processes.find(spec.process_name) is not None


def _launch(spec: ServerSpec, config: str, fingerprint: str, docker_host: str | None) -> None:
    home = spec.directory / "home"
    home.mkdir(parents=True, exist_ok=True)
    config_path = spec.directory / "config.toml"
    config_path.write_text(config)
    config_path.chmod(0o600)  # it holds the API key
    # HOME holds the server's metadata patches and renewals; one per server keeps them apart.
    env = {**os.environ, "HOME": str(home)}
    env.pop("OPENSANDBOX_SERVER_API_KEY", None)  # it would override the key in the config
    if docker_host is not None:
        env["DOCKER_HOST"] = docker_host
    argv = [str(SERVER_VENV / "bin" / "opensandbox-server"), "--config", str(config_path)]
    processes.start(spec.process_name, argv, env=env, fingerprint=fingerprint)


def _wait_healthy(spec: ServerSpec) -> None:
    deadline = time.monotonic() + HEALTH_WAIT_SECONDS
    url = f"http://{HOST}:{spec.port}/health"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if processes.find(spec.process_name) is None or time.monotonic() > deadline:
            raise RuntimeError(
                f"The {spec.name!r} OpenSandbox server did not become healthy on port {spec.port}; "
                f"read its log, {processes.log_file(spec.process_name)}."
            )
        time.sleep(0.2)


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
