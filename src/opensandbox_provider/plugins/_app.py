"""The Sandboxes view's FastAPI app: the page, its JSON, and the kill action.

Mounted by Airflow's api-server under its own authentication: every route resolves the user
as Airflow's own API does (its JWT, from the header or the UI's cookie), and each sandbox is
shown, or killed, only for a user whom the auth manager lets read, or edit, the task
instances of the Dag that made it. A connection's id, server and errors are shown only to a
user it lets read that connection, as Airflow's own connection pages are. The API key of a
connection never leaves the server. Only this Airflow deployment's sandboxes are listed.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from airflow.providers.common.ai.sandbox.base import SandboxError
from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook
from opensandbox_provider.plugins._connections import opensandbox_connection_ids
from opensandbox_provider.plugins._page import render_page
from opensandbox_provider.sandbox._lifecycle import Lifecycle

if TYPE_CHECKING:
    from opensandbox_provider._identity import TaskInstanceIdentity
    from opensandbox_provider.hooks._sandboxes import SandboxSummary

log = logging.getLogger(__name__)

# What a user who may not read a connection is told when its server could not be listed.
HIDDEN_ERROR = "the reason is shown only to users who may read Airflow's connections."

# The kill action must come from the page's own script: a form on another site can send the
# UI's cookie with a POST, but cannot set a header.
ACTION_HEADER = "X-OpenSandbox-Action"
# Reading a sandbox is reading its task instance; killing it is changing that task instance.
Method = Literal["GET", "PUT"]


@dataclass(frozen=True)
class ServerSandboxes:
    """
    One connection's server and what it listed, or why it could not; ``conn_id`` and
    ``server`` are ``None``, and ``error`` says only that it failed, for a user who may not
    read the connection.
    """

    conn_id: str | None
    server: str | None
    sandboxes: list[SandboxSummary]
    error: str | None = None


async def _user(request: Request) -> Any:
    """The signed-in user, exactly as Airflow's own routes resolve one; 401 without one."""
    # Airflow offers plugins no public way to resolve the user; its routes take this
    # dependency, called here directly. Its middle parameter is ``oauth_token`` on 3.1 and
    # ``_oauth_token`` from 3.2, so it is passed by position (tests/unit/plugins/test_sandboxes.py
    # resolves a real token through this on the installed Airflow).
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    return await get_user(request, None, credentials)


def _allowed(
    user: Any, conn_id: str, identity: TaskInstanceIdentity | None, method: Method
) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        ConnectionDetails,
        DagAccessEntity,
        DagDetails,
    )

    manager = get_auth_manager()
    if identity is None:
        # Made outside a task: only whoever may change the connection may act on it.
        return manager.is_authorized_connection(
            method=method, details=ConnectionDetails(conn_id=conn_id), user=user
        )
    return manager.is_authorized_dag(
        method=method,
        access_entity=DagAccessEntity.TASK_INSTANCE,
        details=DagDetails(id=identity.dag_id),
        user=user,
    )


def _may_read_connection(user: Any, conn_id: str) -> bool:
    # What _allowed asks of a sandbox made outside a task, asked to read.
    return _allowed(user, conn_id, None, "GET")


def _servers(user: Any, filters: dict[str, Any]) -> list[ServerSandboxes]:
    found = []
    for conn_id in opensandbox_connection_ids():
        listed = _listing(conn_id, filters)
        visible = [s for s in listed.sandboxes if _allowed(user, conn_id, s.identity, "GET")]
        listed = replace(listed, sandboxes=visible)
        if not _may_read_connection(user, conn_id):
            error = None if listed.error is None else HIDDEN_ERROR
            listed = replace(listed, conn_id=None, server=None, error=error)
        found.append(listed)
    return found


def _listing(conn_id: str, filters: dict[str, Any]) -> ServerSandboxes:
    """What one connection's server lists, or, however that fails, why: never an exception."""
    hook = OpenSandboxHook(conn_id)
    try:
        return ServerSandboxes(conn_id, hook.server_url, hook.list_sandboxes(**filters))
    except (SandboxError, InvalidConnectionError) as error:
        return ServerSandboxes(conn_id, None, [], error=str(error))
    except Exception as error:
        # One connection the hook fails on in a way nobody foresaw must not take the page, and
        # every other connection's sandboxes with it, down to a 500.
        log.exception("Listing the sandboxes of connection %s failed unexpectedly.", conn_id)
        return ServerSandboxes(
            conn_id,
            None,
            [],
            error=f"An unexpected {type(error).__name__}: {error} (the api-server's log has "
            "the traceback).",
        )


def _filters(
    dag_id: str | None, run_id: str | None, task_id: str | None, map_index: str | None
) -> dict[str, Any]:
    filters: dict[str, Any] = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id}
    if map_index not in (None, ""):
        try:
            filters["map_index"] = int(map_index)
        except ValueError:
            raise HTTPException(400, f"map_index is {map_index!r}; give a whole number.") from None
    return {name: value for name, value in filters.items() if value not in (None, "")}


def build_app() -> FastAPI:
    app = FastAPI(title="OpenSandbox sandboxes", docs_url=None, redoc_url=None)
    # The hook's calls block, so each route runs them in a thread: the api-server's event loop
    # must not wait on a slow server.

    @app.get("/sandboxes", response_class=HTMLResponse)
    async def page(
        request: Request,
        dag_id: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
        map_index: str | None = None,
    ) -> HTMLResponse:
        user = await _user(request)
        filters = _filters(dag_id, run_id, task_id, map_index)
        servers = await run_in_threadpool(_servers, user, filters)
        airflow_root = request.scope.get("root_path", "").removesuffix("/opensandbox")
        return HTMLResponse(render_page(servers, filters, airflow_root=airflow_root))

    @app.get("/api/sandboxes")
    async def listing(
        request: Request,
        dag_id: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
        map_index: str | None = None,
    ) -> list[dict[str, Any]]:
        user = await _user(request)
        filters = _filters(dag_id, run_id, task_id, map_index)
        servers = await run_in_threadpool(_servers, user, filters)
        return [asdict(server) for server in servers]

    @app.post("/api/sandboxes/{sandbox_id}/kill")
    async def kill(
        request: Request,
        sandbox_id: str,
        action: str | None = Header(default=None, alias=ACTION_HEADER),
    ) -> dict[str, Any]:
        user = await _user(request)
        if action != "kill":
            raise HTTPException(400, f"Send the {ACTION_HEADER}: kill header to kill a sandbox.")
        return await run_in_threadpool(_kill, user, sandbox_id)

    return app


def _kill(user: Any, sandbox_id: str) -> dict[str, Any]:
    # Found by its id on every connection's server rather than on one the request names: a
    # user who may kill a task's sandbox need not be one who may read the connection.
    for conn_id in opensandbox_connection_ids():
        listed = _listing(conn_id, {})
        # Only a sandbox this deployment's tasks made, looked up rather than trusted from the
        # request: its owner decides who may kill it.
        summary = next((s for s in listed.sandboxes if s.id == sandbox_id), None)
        if summary is None:
            continue
        if not _allowed(user, conn_id, summary.identity, "PUT"):
            raise HTTPException(403, f"You may not change the task that owns {sandbox_id}.")
        try:
            killed = Lifecycle(OpenSandboxHook(conn_id).get_conn).kill(sandbox_id)
        except (SandboxError, InvalidConnectionError) as error:
            raise HTTPException(502, f"Could not kill sandbox {sandbox_id}: {error}") from None
        return {"sandbox": sandbox_id, "killed": killed}
    raise HTTPException(
        404,
        f"No opensandbox connection's server has a sandbox {sandbox_id} made by this Airflow "
        "deployment's tasks; it may have ended already.",
    )
