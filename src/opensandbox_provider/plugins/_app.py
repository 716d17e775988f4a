"""The Sandboxes view's FastAPI app: the page, its JSON, and the kill action.

Mounted by Airflow's api-server under its own authentication: every route resolves the user
as Airflow's own API does (its JWT, from the header or the UI's cookie), and each sandbox is
shown, or killed, only for a user whom the auth manager lets read, or edit, the task
instances of the Dag that made it. The API key of a connection never leaves the server.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from airflow.providers.common.ai.sandbox.base import SandboxError
from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import HTMLResponse

from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook
from opensandbox_provider.plugins._connections import opensandbox_connection_ids
from opensandbox_provider.plugins._page import render_page

if TYPE_CHECKING:
    from opensandbox_provider._identity import TaskInstanceIdentity
    from opensandbox_provider.hooks._sandboxes import SandboxSummary

# The kill action must come from the page's own script: a form on another site can send the
# UI's cookie with a POST, but cannot set a header.
ACTION_HEADER = "X-OpenSandbox-Action"
# Reading a sandbox is reading its task instance; killing it is changing that task instance.
Method = Literal["GET", "PUT"]


@dataclass(frozen=True)
class ServerSandboxes:
    """One connection's server and what it listed, or why it could not."""

    conn_id: str
    server: str | None
    sandboxes: list[SandboxSummary]
    error: str | None = None


async def _user(request: Request) -> Any:
    """The signed-in user, exactly as Airflow's own routes resolve one; 401 without one."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    return await get_user(request=request, _oauth_token=None, bearer_credentials=credentials)


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


def _servers(user: Any, filters: dict[str, Any]) -> list[ServerSandboxes]:
    found = []
    for conn_id in opensandbox_connection_ids():
        hook = OpenSandboxHook(conn_id)
        try:
            server = hook.server_url
            listed = hook.list_sandboxes(**filters)
        except (SandboxError, InvalidConnectionError) as error:
            found.append(ServerSandboxes(conn_id, None, [], error=str(error)))
            continue
        visible = [s for s in listed if _allowed(user, conn_id, s.identity, "GET")]
        found.append(ServerSandboxes(conn_id, server, visible))
    return found


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
        servers = await _in_thread(_servers, user, filters)
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
        servers = await _in_thread(_servers, user, _filters(dag_id, run_id, task_id, map_index))
        return [asdict(server) for server in servers]

    @app.post("/api/connections/{conn_id}/sandboxes/{sandbox_id}/kill")
    async def kill(
        request: Request,
        conn_id: str,
        sandbox_id: str,
        action: str | None = Header(default=None, alias=ACTION_HEADER),
    ) -> dict[str, Any]:
        user = await _user(request)
        if action != "kill":
            raise HTTPException(400, f"Send the {ACTION_HEADER}: kill header to kill a sandbox.")
        return await _in_thread(_kill, user, conn_id, sandbox_id)

    return app


def _kill(user: Any, conn_id: str, sandbox_id: str) -> dict[str, Any]:
    if conn_id not in opensandbox_connection_ids():
        raise HTTPException(404, f"There is no opensandbox connection {conn_id!r}.")
    hook = OpenSandboxHook(conn_id)
    try:
        # Only a sandbox this provider made, looked up rather than trusted from the request:
        # its owner decides who may kill it.
        summary = next((s for s in hook.list_sandboxes() if s.id == sandbox_id), None)
        if summary is None:
            raise HTTPException(
                404, f"The server of {conn_id!r} has no sandbox {sandbox_id} made by Airflow."
            )
        if not _allowed(user, conn_id, summary.identity, "PUT"):
            raise HTTPException(403, f"You may not change the task that owns {sandbox_id}.")
        killed = hook.kill_sandbox(sandbox_id)
    except (SandboxError, InvalidConnectionError) as error:
        raise HTTPException(502, f"Could not kill sandbox {sandbox_id}: {error}") from None
    return {"sandbox": sandbox_id, "killed": killed}


async def _in_thread(function: Any, *arguments: Any) -> Any:
    # The hook's calls block; the api-server's event loop must not wait on a slow server.
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(function, *arguments)
