"""
Credentials for a private image's registry, read from an Airflow ``docker`` connection, sent
in the create request alone and only to that registry (docs/operator.rst, "Private images").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider._errors import status_of, to_sandbox_error

if TYPE_CHECKING:
    from opensandbox.models.sandboxes import SandboxImageSpec

DOCKER_HUB = "docker.io"
# The names Docker Hub goes by in a reference or in a docker connection's host.
_HUB_ALIASES = frozenset({DOCKER_HUB, "index.docker.io", "registry-1.docker.io"})
# The server's code for an image its Docker runtime could not pull.
_PULL_FAILED = "IMAGE_PULL_FAILED"


@dataclass(frozen=True)
class RegistryLogin:
    """A registry and the login for it, the password kept out of every repr."""

    registry: str
    username: str
    password: str = field(repr=False)


def registry_of(image: str) -> str:
    """The registry ``image`` is pulled from, as Docker reads a reference."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return DOCKER_HUB if first in _HUB_ALIASES else first
    return DOCKER_HUB


def read_login(conn_id: str) -> RegistryLogin:
    """The registry and login of connection ``conn_id``, refusing one that lacks either."""
    from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException as e:
        raise SandboxTerminalError(
            f"registry_conn_id names connection {conn_id!r}, which does not exist: create it as "
            "a docker connection with the registry as its host, a login and a password."
        ) from e
    host = (conn.host or "").strip()
    # DockerOperator's connections name the registry as a host, a host and port, or a URL.
    netloc = urlsplit(host if "://" in host else f"//{host}").netloc
    if not netloc or not conn.login or not conn.password:
        raise SandboxTerminalError(
            f"Connection {conn_id!r} names no registry with a login: set its host to the "
            "registry (such as 'registry.example.com:5000'), its login and its password, as "
            "for a docker connection."
        )
    registry = DOCKER_HUB if netloc in _HUB_ALIASES else netloc
    return RegistryLogin(registry=registry, username=conn.login, password=conn.password)


def image_spec(image: str, conn_id: str | None) -> SandboxImageSpec | str:
    """
    ``image`` as the server is sent it: with the login of ``conn_id`` when there is one, which
    must be for the image's own registry, since a password goes to no other registry.
    """
    if conn_id is None:
        return image
    from opensandbox.models.sandboxes import SandboxImageAuth, SandboxImageSpec

    login = read_login(conn_id)
    registry = registry_of(image)
    if login.registry != registry:
        raise SandboxTerminalError(
            f"Connection {conn_id!r} holds a login for registry {login.registry}, and image "
            f"{image} is pulled from {registry}: a login is sent only to its own registry. Name "
            f"the image with its registry ({login.registry}/...), or give registry_conn_id a "
            f"connection for {registry}."
        )
    return SandboxImageSpec(
        image, auth=SandboxImageAuth(username=login.username, password=login.password)
    )


def explain_refusal(error: Exception, image: str | None, conn_id: str | None) -> Exception | None:
    """A create refused because the image could not be pulled, with what to do; else ``None``."""
    if image is None or status_of(error) is None:
        return None
    code = str(getattr(getattr(error, "error", None), "code", "") or "")
    if _PULL_FAILED not in code:
        return None
    detail = to_sandbox_error(error, "create a sandbox", terminal=True)
    return SandboxTerminalError(f"{detail} {pull_advice(image, conn_id)}")


def pull_advice(image: str, conn_id: str | None) -> str:
    """That ``image`` could not be pulled, from where, with which login, and what to do."""
    registry = registry_of(image)
    if conn_id is None:
        advice = (
            f"It was pulled from {registry} without a login: if the registry is private, give "
            "registry_conn_id, a docker connection with the registry's login and password."
        )
    else:
        advice = (
            f"It was pulled from {registry} with the login of connection {conn_id!r}: check "
            "that its login and password are the registry's, and that the image exists there."
        )
    return f"The server could not pull image {image}. {advice}"
