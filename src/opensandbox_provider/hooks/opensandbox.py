"""An Airflow connection to an OpenSandbox server, as the SDK's connection config."""

from __future__ import annotations

import asyncio
import ipaddress
import math
import os
import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from airflow.providers.common.compat.sdk import BaseHook

from opensandbox_provider._sdk import OpenSandboxNotInstalled, require_sdk
from opensandbox_provider._sdk_log import quiet_sdk_loggers
from opensandbox_provider.hooks._form import connection_form_widgets, ui_field_behaviour

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Connection
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.sync.manager import SandboxManagerSync

    from opensandbox_provider._connection_config import AsyncConnectionConfig
    from opensandbox_provider.hooks._sandboxes import SandboxSummary

# Where the SDK reads its server and key from when it is given neither.
DOMAIN_VARIABLE = "OPEN_SANDBOX_DOMAIN"
API_KEY_VARIABLE = "OPEN_SANDBOX_API_KEY"
# The SDK's own default, kept when the connection sets none.
DEFAULT_REQUEST_TIMEOUT = 30.0
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
# use_server_proxy under a name Airflow does not take for a secret's. Airflow masks, in every
# log, each string value of an extra whose name contains "proxy", and a URI gives every extra
# as a string: use_server_proxy=false there would turn each "false" in the task logs to ***.
ROUTE_THROUGH_SERVER = "route_through_server"


class InvalidConnectionError(ValueError):
    """The connection cannot describe an OpenSandbox server as it is filled in."""


class OpenSandboxHook(BaseHook):
    """
    Reach an OpenSandbox server's lifecycle API through an Airflow connection.

    The connection's host and port name the server, its schema is ``http`` or ``https``, and
    its password is the server's API key; its extras, and which of them common-ai's built-in
    backend reads too, are in docs/connections.rst.

    With ``opensandbox_conn_id=None`` the server comes from ``OPEN_SANDBOX_DOMAIN`` and the
    key from ``OPEN_SANDBOX_API_KEY``, as for the SDK on its own.

    Nothing is read until :attr:`connection_config` is first used, so constructing the
    hook costs nothing at Dag parse time.

    :meth:`list_sandboxes` finds the server's sandboxes by the task instance that created
    them, and :meth:`kill_sandbox` and :meth:`renew_sandbox` end them or move their expiry.

    :param opensandbox_conn_id: The connection to read, or ``None`` for the environment.
    :param use_server_proxy: Overrides the connection's ``use_server_proxy`` extra. When
        neither sets it, sandboxes are reached through the server, which works wherever the
        server does.
    """

    conn_name_attr = "opensandbox_conn_id"
    default_conn_name = "opensandbox_default"
    conn_type = "opensandbox"
    hook_name = "OpenSandbox"

    def __init__(
        self,
        opensandbox_conn_id: str | None = default_conn_name,
        *,
        use_server_proxy: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.opensandbox_conn_id = opensandbox_conn_id
        self._use_server_proxy = use_server_proxy

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The extras' form fields, for Airflow before 3.2 (later ones read the provider info)."""
        return connection_form_widgets()

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Hidden, relabelled and placeholder fields, for Airflow before 3.2."""
        return ui_field_behaviour()

    def get_conn(self) -> ConnectionConfigSync:
        return self.connection_config

    @cached_property
    def connection_config(self) -> ConnectionConfigSync:
        """
        The SDK's connection config, without a transport: each sandbox built on it gets its own.

        Raises :class:`InvalidConnectionError` when the connection is not usable as filled in.
        """
        settings = self._settings
        from opensandbox_provider._connection_config import SDK_TAKES_REQUESTS, ConnectionConfig

        if settings.get("resource_requests") and not SDK_TAKES_REQUESTS:
            raise InvalidConnectionError(
                f"Connection {self.opensandbox_conn_id!r} sets a resource request, which the "
                "OpenSandbox SDK installed cannot send. Install the SDK version this provider "
                "pins, or leave cpu_request and memory_request out."
            )
        return ConnectionConfig(**settings)

    async def async_connection_config(self) -> AsyncConnectionConfig:
        """
        The SDK's async connection config, new at each call, on a transport of its own that the
        caller closes (see :mod:`~opensandbox_provider._connection_config`): for the triggerer,
        whose calls share one event loop, so the connection is read without blocking it. It
        creates no sandbox, so it carries no resource requests.
        """
        require_sdk()
        if self.opensandbox_conn_id is None:
            read = self._from_environment()
        else:
            read = self._from_connection(*await self._aread_connection(self.opensandbox_conn_id))
        settings = self._resolved(read)
        settings.pop("resource_requests", None)
        from opensandbox_provider._connection_config import on_a_transport_of_its_own

        return on_a_transport_of_its_own(**settings)

    async def _aread_connection(self, conn_id: str) -> tuple[Connection, dict[str, Any]]:
        """
        The connection and its extras, read on an event loop: through Airflow's async lookup
        where the installed common-compat offers it (which runs the sync one on a worker
        thread on an Airflow without a safe async one), else on a worker thread here.
        """
        try:
            from airflow.providers.common.compat.connection import (
                get_async_connection,
                get_async_extra_dejson,
            )
        except ImportError:
            conn = await asyncio.to_thread(self.get_connection, conn_id)
            return conn, await asyncio.to_thread(lambda: conn.extra_dejson)
        conn = await get_async_connection(conn_id, hook=self)
        return conn, await get_async_extra_dejson(conn)

    @cached_property
    def _settings(self) -> dict[str, Any]:
        """What the connection, or the environment, says of the server, checked."""
        require_sdk()
        if self.opensandbox_conn_id is None:
            return self._resolved(self._from_environment())
        conn = self.get_connection(self.opensandbox_conn_id)
        return self._resolved(self._from_connection(conn, conn.extra_dejson))

    def _resolved(self, settings: dict[str, Any]) -> dict[str, Any]:
        """``settings`` with the route to sandboxes decided, this hook's override first."""
        quiet_sdk_loggers()
        use_server_proxy = settings.pop("use_server_proxy", None)
        if self._use_server_proxy is not None:
            use_server_proxy = self._use_server_proxy
        # Through the server unless told otherwise: that works wherever the server does.
        settings["use_server_proxy"] = True if use_server_proxy is None else use_server_proxy
        return settings

    @property
    def server_url(self) -> str:
        """Where the lifecycle API is, for messages: never carries the API key."""
        config = self.connection_config
        return f"{config.protocol}://{config.domain}"

    # --- The sandboxes on the server ---

    def list_sandboxes(
        self,
        *,
        dag_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        map_index: int | None = None,
        try_number: int | None = None,
        created_by_provider: bool = True,
        states: Sequence[str] | None = None,
    ) -> list[SandboxSummary]:
        """
        The sandboxes on the server that this Airflow deployment and the task instance fields
        given created, each field left ``None`` matching any; ``map_index=-1`` matches
        unmapped tasks only. Another deployment's sandboxes, and those made before sandboxes
        carried their deployment, are never listed, so neither is killed by what a listing
        finds (see :mod:`~opensandbox_provider._deployment`).

        ``created_by_provider`` keeps to sandboxes this provider created, and ``states`` to
        sandboxes in those lifecycle states (``"Running"``, ``"Paused"``, ...).
        """
        from airflow.providers.common.ai.sandbox.base import SandboxError

        from opensandbox_provider._deployment import DeploymentUnknownError, deployment_id
        from opensandbox_provider._errors import as_sandbox_errors
        from opensandbox_provider.hooks._sandboxes import SandboxQuery, list_sandboxes

        try:
            deployment = deployment_id()
        except DeploymentUnknownError as e:
            raise SandboxError(str(e)) from e
        query = SandboxQuery(
            deployment=deployment,
            dag_id=dag_id,
            task_id=task_id,
            run_id=run_id,
            map_index=map_index,
            try_number=try_number,
            created_by_provider=created_by_provider,
            states=states,
        )
        # Read whole before it is returned: a caller that kills what it lists would
        # otherwise move the pages under the listing.
        with as_sandbox_errors(f"list the sandboxes on {self.server_url}"), self._manager() as m:
            return list(list_sandboxes(m, query))

    def kill_sandbox(self, sandbox_id: str) -> bool:
        """End ``sandbox_id`` now; ``False`` when the server no longer had it."""
        from opensandbox_provider._errors import as_sandbox_errors, done_unless_missing

        with as_sandbox_errors(f"kill sandbox {sandbox_id}"), self._manager() as manager:
            return done_unless_missing(lambda: manager.kill_sandbox(sandbox_id))

    def renew_sandbox(self, sandbox_id: str, seconds: float) -> datetime:
        """Move the expiry of ``sandbox_id`` to ``seconds`` from now; return the new expiry."""
        from opensandbox_provider._errors import as_sandbox_errors

        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"seconds is {seconds!r}; give a positive number of seconds.")
        with as_sandbox_errors(f"renew sandbox {sandbox_id}"), self._manager() as manager:
            return manager.renew_sandbox(sandbox_id, timedelta(seconds=seconds)).expires_at

    def keep_sandbox(self, sandbox_id: str, seconds: float) -> datetime:
        """
        Keep ``sandbox_id`` for ``seconds`` from now for someone to look into: its expiry is
        moved to then, and it is marked kept until then, which the retry rule and the
        maintenance cleanup respect. Nothing renews it after; return when it goes.
        """
        from opensandbox_provider._errors import as_sandbox_errors
        from opensandbox_provider._kept import keep

        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"seconds is {seconds!r}; give a positive number of seconds.")
        with as_sandbox_errors(f"keep sandbox {sandbox_id}"), self._manager() as manager:
            return keep(manager, sandbox_id, seconds)

    @contextmanager
    def _manager(self) -> Iterator[SandboxManagerSync]:
        """A client of its own for the calls of one method: safe from any thread or handler."""
        from opensandbox.sync.manager import SandboxManagerSync

        with SandboxManagerSync.create(self.connection_config) as manager:
            yield manager

    def _from_connection(self, conn: Connection, extra: dict[str, Any]) -> dict[str, Any]:
        conn_id = str(self.opensandbox_conn_id)
        host = (conn.host or "").strip()
        if not host:
            # The SDK would fall back to localhost:8080 and quietly point the worker at itself.
            raise InvalidConnectionError(
                f"Connection {conn_id!r} has no host. Set it to the OpenSandbox server's address, "
                "or use opensandbox_conn_id=None to read OPEN_SANDBOX_DOMAIN."
            )
        if "://" in host or "/" in host:
            raise InvalidConnectionError(
                f"The host of connection {conn_id!r} is {host!r}; it must be a bare host name or "
                "address. Put the protocol in the connection's schema (http or https) and the port "
                "in its Port field."
            )
        host, port = _host_and_port(host, conn.port, conn_id)
        protocol = (conn.schema or "http").strip().lower()
        if protocol not in ("http", "https"):
            raise InvalidConnectionError(
                f"The schema of connection {conn_id!r} is {conn.schema!r}; set it to http or https."
            )
        return {
            "domain": f"{host}:{port}" if port else host,
            "protocol": protocol,
            "api_key": conn.password or None,
            "request_timeout": timedelta(
                seconds=_request_timeout(extra.get("request_timeout"), conn_id)
            ),
            "use_server_proxy": _use_server_proxy(extra, conn_id),
            "ca_certificates": _ca_certificates(extra.get("ca_bundle"), conn_id),
            "resource_requests": _resource_requests(extra, conn_id),
        }

    @staticmethod
    def _from_environment() -> dict[str, Any]:
        domain = os.environ.get(DOMAIN_VARIABLE, "").strip()
        if not domain:
            raise InvalidConnectionError(
                f"No connection id was given and {DOMAIN_VARIABLE} is not set, so "
                "there is no OpenSandbox server to use. Set it to the server's host:port, or pass "
                "an opensandbox connection id."
            )
        protocol = "https" if domain.startswith("https://") else "http"
        domain = domain.removeprefix(f"{protocol}://")
        return {
            "domain": domain.rstrip("/"),
            "protocol": protocol,
            "api_key": os.environ.get(API_KEY_VARIABLE) or None,
            "request_timeout": timedelta(seconds=DEFAULT_REQUEST_TIMEOUT),
        }

    def test_connection(self) -> tuple[bool, str]:
        """
        List one sandbox: an authenticated lifecycle call that changes nothing.

        Each way it can fail gets its own message, since "the server is down", "the key is
        wrong", "TLS failed" and "that is not an OpenSandbox server" need different fixes.
        """
        try:
            config = self.connection_config
        except (InvalidConnectionError, OpenSandboxNotInstalled) as e:
            return False, str(e)
        from opensandbox.exceptions import SandboxException
        from opensandbox.models.sandboxes import SandboxFilter
        from opensandbox.sync.manager import SandboxManagerSync
        from opensandbox.transport import RetryPolicy

        # What a failed call raises: the SDK's errors, a transport's, an answer of another
        # shape. Never Exception, which on Airflow 2 holds the task timeout too.
        failures = (SandboxException, httpx.HTTPError, OSError, ValueError)

        url = self.server_url
        # A test should answer at once; the SDK's retries would hide a refused connection
        # behind two seconds of backoff.
        fast: ConnectionConfigSync = config.model_copy(
            update={"retry_policy": RetryPolicy.disabled()}
        )
        try:
            with SandboxManagerSync.create(fast) as manager:
                manager.list_sandbox_infos(SandboxFilter(page_size=1))
        except failures as e:
            return False, _describe_failure(e, url)
        return True, f"Connected to the OpenSandbox server at {url}; it accepted the API key."


def _host_and_port(host: str, port: int | None, conn_id: str) -> tuple[str, int | None]:
    """
    The host as a URL needs it (an IPv6 address bracketed), and the port.

    A port written into the host, as ``host:port`` or ``[IPv6]:port``, is taken when the Port
    field is empty or agrees: common-ai's backend accepts that shape, so a connection made for
    it works here too. A bare IPv6 address has more than one colon and never carries a port.
    """
    address, colon, written = host, "", ""
    if host.startswith("["):
        address, bracket, rest = host[1:].partition("]")
        if not bracket or rest[:1] not in ("", ":"):
            raise InvalidConnectionError(
                f"The host of connection {conn_id!r} is {host!r}, which opens a bracket it does "
                "not close right after the address. Write an IPv6 address bare or as [address], "
                "and put the port in the connection's Port field."
            )
        colon, written = rest[:1], rest[1:]
    elif host.count(":") == 1:
        address, colon, written = host.partition(":")
    if colon:
        if not (written.isascii() and written.isdigit() and 0 < int(written) < 65536):
            raise InvalidConnectionError(
                f"The host of connection {conn_id!r} is {host!r}, and {written!r} after its colon "
                "is not a port. Put the port in the connection's Port field and leave the host "
                "bare."
            )
        if port and port != int(written):
            raise InvalidConnectionError(
                f"Connection {conn_id!r} has port {written} in its host ({host!r}) but {port} in "
                "its Port field. Remove the port from the host and keep the right one in the "
                "Port field."
            )
        port = int(written)
    if host.startswith("[") or ":" in address:
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise InvalidConnectionError(
                f"The host of connection {conn_id!r} is {host!r}, which is neither a host name "
                "with a port nor an IPv6 address. Set the host to the bare name or address, and "
                "put the port in the connection's Port field."
            ) from None
        address = f"[{address}]"
    return address, port


def _use_server_proxy(extra: dict[str, Any], conn_id: str) -> bool | None:
    shared = _optional_bool(extra.get("use_server_proxy"), "use_server_proxy", conn_id)
    own = _optional_bool(extra.get(ROUTE_THROUGH_SERVER), ROUTE_THROUGH_SERVER, conn_id)
    if shared is not None and own is not None and shared != own:
        raise InvalidConnectionError(
            f"Connection {conn_id!r} sets use_server_proxy to {shared} but "
            f"{ROUTE_THROUGH_SERVER} to {own}, and they are the same setting. Keep one of them."
        )
    return shared if own is None else own


def _ca_certificates(path: Any, conn_id: str, name: str = "ca_bundle") -> str | None:
    """The PEM text of the file the ``name`` extra names, checked to hold a certificate."""
    if path is None or path == "":
        return None
    advice = (
        "Set it to the path, on every worker and on the api-server, of a PEM file holding the "
        "certificate of the authority that signed the server's, or leave it out to trust the "
        "default authorities only."
    )
    if not isinstance(path, str):
        raise InvalidConnectionError(
            f"The {name} extra of connection {conn_id!r} is {path!r}, not a path. {advice}"
        )
    try:
        pem = Path(path).read_text(encoding="ascii")
    except OSError as e:
        raise InvalidConnectionError(
            f"The {name} extra of connection {conn_id!r} names {path!r}, which cannot be "
            f"read ({e.strerror or e}). {advice}"
        ) from e
    except UnicodeDecodeError:
        pem = ""  # not PEM, which is ASCII: refused below with the same message as any other
    # A context that trusts nothing else, so that what it holds afterwards is this file's
    # alone; every way of holding no certificate gets the one message below.
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with suppress(ssl.SSLError, ValueError):
        probe.load_verify_locations(cadata=pem)
    if not probe.cert_store_stats()["x509"]:
        raise InvalidConnectionError(
            f"The {name} extra of connection {conn_id!r} names {path!r}, which holds no "
            f"certificate in PEM form. {advice}"
        )
    return pem


# Each extra that sets a resource request, and the key the server takes it under.
REQUEST_EXTRAS = {"cpu_request": "cpu", "memory_request": "memory"}


def _resource_requests(extra: dict[str, Any], conn_id: str) -> dict[str, str] | None:
    """
    What each sandbox asks the scheduler for, or ``None`` to ask for its limits: on the
    connection, since how densely a cluster is packed is the platform's choice, not each
    task's (docs/connections.rst).
    """
    requests = {}
    for name, key in REQUEST_EXTRAS.items():
        value = extra.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or len(value.split()) != 1:
            raise InvalidConnectionError(
                f"The {name} extra of connection {conn_id!r} is {value!r}; set it to a "
                f"Kubernetes quantity such as {'250m' if key == 'cpu' else '256Mi'}, or leave it "
                "out to ask for the sandbox's limit."
            )
        requests[key] = value.strip()
    return requests or None


def _request_timeout(value: Any, conn_id: str | None) -> float:
    if value is None or value == "":
        return DEFAULT_REQUEST_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds <= 0:
        raise InvalidConnectionError(
            f"The request_timeout extra of connection {conn_id!r} is {value!r}; set it to a "
            "positive number of seconds, or leave it out for 30."
        )
    return seconds


def _optional_bool(value: Any, name: str, conn_id: str | None) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise InvalidConnectionError(
        f"The {name} extra of connection {conn_id!r} is {value!r}; set it to true or false."
    )


def _describe_failure(error: BaseException, url: str) -> str:
    from opensandbox.exceptions import (
        SandboxApiException,
        SandboxConnectionException,
        SandboxTimeoutException,
    )

    if isinstance(error, SandboxConnectionException):
        if any(isinstance(cause, ssl.SSLError) for cause in _causes(error)):
            return (
                f"The TLS handshake with {url} failed ({_cause_text(error)}). If the server "
                "does not serve TLS, set the connection's schema to http; if its certificate is "
                "signed by an authority of your own, set the connection's ca_bundle extra to that "
                "authority's certificate (a PEM file)."
            )
        return (
            f"Could not reach an OpenSandbox server at {url} ({_cause_text(error)}). Check the "
            "connection's host and port, and that the server is running."
        )
    if isinstance(error, SandboxTimeoutException):
        return (
            f"The OpenSandbox server at {url} did not answer in time ({_cause_text(error)}). Check "
            "the host and port, or raise the connection's request_timeout."
        )
    if isinstance(error, SandboxApiException) and error.status_code in (401, 403):
        return (
            f"The OpenSandbox server at {url} refused the API key (HTTP {error.status_code}: "
            f"{error.error.message or 'unauthorized'}). Set the connection's password to the "
            "api_key the server is configured with."
        )
    if isinstance(error, SandboxApiException) and error.error.code not in (
        None,
        "UNEXPECTED_RESPONSE",
    ):
        return (
            f"The OpenSandbox server at {url} refused to list sandboxes (HTTP {error.status_code} "
            f"{error.error.code}: {error.error.message}). Check the server's log."
        )
    status = getattr(error, "status_code", None)
    answered = f"HTTP {status}" if status else type(error).__name__
    return (
        f"Something answered at {url}, but not as an OpenSandbox lifecycle API ({answered}). "
        "Check that the connection's host and port point at the OpenSandbox server, not at "
        "another service."
    )


def _causes(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what caused it, back to the first cause."""
    seen: BaseException | None = error
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _cause_text(error: BaseException) -> str:
    *_, root = _causes(error)
    return str(root) or type(root).__name__
