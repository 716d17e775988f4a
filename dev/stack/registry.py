"""A private image registry of one caller's own: Debian's docker-registry behind basic auth.

It listens on a free loopback port, which the Docker engine trusts without TLS (it treats
every registry on 127.0.0.0/8 as insecure), so neither the engine nor the servers need a
setting of their own for it. The tests of private images push an image here and have the
server pull it with and without the login.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dev.stack import processes

PROGRAM = "docker-registry"
START_SECONDS = 30.0
_CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: 127.0.0.1:{port}
auth:
  htpasswd:
    realm: airflow-opensandbox-tests
    path: {htpasswd}
"""


@dataclass(frozen=True)
class Registry:
    """Where the registry listens, and the one login it accepts."""

    address: str
    username: str
    password: str = field(repr=False)
    # A Docker client configuration of the registry's own, so that a push's login is never
    # written where the host's other Docker clients, the servers among them, would read it.
    docker_config: Path

    def push(self, image: str, name: str) -> str:
        """``image``, pushed here as ``name``; its reference on this registry."""
        reference = f"{self.address}/{name}"
        env = {**os.environ, "DOCKER_CONFIG": str(self.docker_config)}
        subprocess.run(["docker", "tag", image, reference], check=True, capture_output=True)
        subprocess.run(
            ["docker", "login", self.address, "--username", self.username, "--password-stdin"],
            input=self.password,
            text=True,
            check=True,
            capture_output=True,
            env=env,
        )
        subprocess.run(["docker", "push", reference], check=True, capture_output=True, env=env)
        forget(reference)
        return reference


def forget(reference: str) -> None:
    """Untag ``reference`` on the engine, so that the next sandbox of it must pull it."""
    subprocess.run(["docker", "image", "rm", reference], capture_output=True)


@contextmanager
def private(directory: Path, *, username: str, password: str) -> Iterator[Registry]:
    """A registry on a free loopback port accepting ``username`` and ``password``, until the
    block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    htpasswd = directory / "htpasswd"
    made = subprocess.run(
        ["htpasswd", "-B", "-b", "-n", username, password],
        check=True,
        capture_output=True,
        text=True,
    )
    htpasswd.write_text(made.stdout)
    config = directory / "config.yml"
    config.write_text(_CONFIG.format(root=directory / "data", port=port, htpasswd=htpasswd))
    docker_config = directory / "docker-client"
    docker_config.mkdir()
    with (directory / "registry.log").open("wb") as log:
        process = subprocess.Popen(
            [PROGRAM, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            processes.wait_answering(
                lambda: _accepts(port),
                alive=lambda: process.poll() is None,
                seconds=START_SECONDS,
                failure=f"docker-registry did not answer on 127.0.0.1:{port}; read its log, "
                f"{directory / 'registry.log'}.",
            )
            yield Registry(f"127.0.0.1:{port}", username, password, docker_config)
        finally:
            process.terminate()
            process.wait(timeout=10)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
