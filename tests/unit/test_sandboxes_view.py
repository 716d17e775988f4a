"""The Sandboxes view's pieces that need no api-server: the plugin's registration, the page's
HTML, and the one Airflow function it calls by its parameters' names."""

from __future__ import annotations

import inspect
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points

from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider.hooks._sandboxes import SandboxSummary
from opensandbox_provider.plugins._app import ServerSandboxes
from opensandbox_provider.plugins._page import render_page
from opensandbox_provider.plugins.sandboxes import PAGE, OpenSandboxPlugin


def _summary(identity: TaskInstanceIdentity | None, **fields: object) -> SandboxSummary:
    # Now, not at import: the page counts from its own clock, minutes after collection.
    now = datetime.now(UTC)
    values = {
        "id": "sbx-1",
        "state": "Running",
        "image": "python:3.12-slim",
        "created_at": now - timedelta(minutes=5),
        "expires_at": now + timedelta(minutes=30),
        "identity": identity,
        "created_by_provider": True,
        "provisioned": False,
        "deployment": "production",
    }
    return SandboxSummary(**{**values, **fields})  # type: ignore[arg-type]


def test_the_plugin_is_registered_for_airflow_and_links_the_page_from_the_ui() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="airflow.plugins")}
    assert plugins["opensandbox"] == "opensandbox_provider.plugins.sandboxes:OpenSandboxPlugin"
    views = {view["destination"]: view for view in OpenSandboxPlugin.external_views}
    assert views["nav"]["href"] == PAGE
    assert "{DAG_ID}" in views["task_instance"]["href"]
    assert OpenSandboxPlugin.fastapi_apps[0]["url_prefix"] == "/opensandbox"


def test_loading_the_plugin_imports_no_api_server_code() -> None:
    # Every Airflow process loads plugins, a task's too: the app is built on first request.
    probe = (
        "import sys, opensandbox_provider.plugins.sandboxes\n"
        "loaded = [m for m in ('fastapi', 'opensandbox_provider.plugins._app',"
        " 'airflow.api_fastapi.core_api.security') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_the_page_escapes_what_a_server_or_a_dag_author_wrote() -> None:
    hostile = TaskInstanceIdentity(
        dag_id="d<script>alert(1)</script>", task_id="t'x", run_id="manual__1", try_number=2
    )
    servers = [ServerSandboxes("os", "http://server:8080", [_summary(hostile, image="<b>i</b>")])]
    html = render_page(servers, {}, airflow_root="")
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;i&lt;/b&gt;" in html
    assert "t&#x27;x" in html


def test_the_page_links_each_sandbox_to_its_task_instance() -> None:
    mapped = TaskInstanceIdentity(dag_id="d", task_id="t", run_id="scheduled__2026/1", map_index=3)
    html = render_page(
        [ServerSandboxes("os", "http://s", [_summary(mapped)])], {}, airflow_root="/airflow"
    )
    assert "data-ui-path='/airflow/dags/d/runs/scheduled__2026%2F1/tasks/t/mapped/3'" in html
    assert "in 29 min" in html or "in 30 min" in html
    orphan = render_page([ServerSandboxes("os", "http://s", [_summary(None)])], {}, airflow_root="")
    assert "made outside a task" in orphan


def test_the_page_says_why_a_server_could_not_be_listed() -> None:
    down = ServerSandboxes("os", None, [], error="Could not reach http://s: refused")
    html = render_page([down], {}, airflow_root="")
    assert "Could not list its sandboxes: Could not reach http://s: refused" in html
    assert "No connection of type opensandbox" in render_page([], {}, airflow_root="")


def test_airflows_get_user_still_takes_the_parameters_the_view_passes() -> None:
    # The view resolves the user by calling Airflow's own dependency directly; a renamed
    # parameter must fail here, on the pinned Airflow, not as a 500 in the UI.
    from airflow.api_fastapi.core_api.security import get_user

    assert list(inspect.signature(get_user).parameters) == [
        "request",
        "_oauth_token",
        "bearer_credentials",
    ]
