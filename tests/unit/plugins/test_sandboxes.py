"""The Sandboxes view's pieces that need no api-server: the plugin's registration, the page's
HTML, what each user is shown of a connection, and the one Airflow function it calls directly,
resolving a real token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points
from typing import Any, ClassVar

import pytest

# Airflow 3's UI serves the view as a FastAPI app; Airflow 2 has no FastAPI and no such UI.
pytest.importorskip("fastapi", reason="the Sandboxes view is a FastAPI app of Airflow 3's UI")

from airflow.providers.common.ai.sandbox.base import SandboxError  # noqa: E402

from opensandbox_provider._identity import TaskInstanceIdentity  # noqa: E402
from opensandbox_provider.hooks._sandboxes import SandboxSummary  # noqa: E402
from opensandbox_provider.plugins._app import ServerSandboxes  # noqa: E402
from opensandbox_provider.plugins._page import render_page  # noqa: E402
from opensandbox_provider.plugins.sandboxes import PAGE, OpenSandboxPlugin  # noqa: E402
from tests.unit.killed_through_hooks import killed_through_hooks  # noqa: E402


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


@pytest.mark.airflow_at_least("3.1", reason="the view's first Airflow line")
def test_the_plugin_is_registered_for_airflow_and_links_the_page_from_the_ui() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="airflow.plugins")}
    assert plugins["opensandbox"] == "opensandbox_provider.plugins.sandboxes:OpenSandboxPlugin"
    views = {view["destination"]: view for view in OpenSandboxPlugin.external_views}
    assert views["nav"]["href"] == PAGE
    assert "{DAG_ID}" in views["task_instance"]["href"]
    assert OpenSandboxPlugin.fastapi_apps[0]["url_prefix"] == "/opensandbox"


# What Airflow's plugins manager, in a process of its own, mounts and shows of this plugin.
_MOUNTED = (
    "import json\n"
    "from airflow import plugins_manager\n"
    # Airflow 3.3 returns the apps; 3.1 and 3.2 keep them in the module once initialized.
    "if hasattr(plugins_manager, 'get_fastapi_plugins'):\n"
    "    apps, _ = plugins_manager.get_fastapi_plugins()\n"
    "else:\n"
    "    plugins_manager.initialize_fastapi_plugins()\n"
    "    apps = plugins_manager.fastapi_apps\n"
    "(ours,) = [p for p in plugins_manager.get_plugin_info() if p['name'] == 'opensandbox']\n"
    "print(json.dumps({'prefixes': [app['url_prefix'] for app in apps],"
    " 'views': [v['url_route'] for v in ours.get('external_views', [])]}))\n"
)


def _mounted(**settings: str) -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", _MOUNTED],
        env=os.environ | settings,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(result.stdout.splitlines()[-1])


def test_with_the_setting_off_airflow_mounts_no_app_and_links_no_view() -> None:
    # With providers discovered eagerly, so the plugin comes through the provider info as
    # well as the entry point. The browser test (tests/airflow_path) sees the view when on.
    hidden = _mounted(
        AIRFLOW__OPENSANDBOX__SANDBOXES_VIEW="False", AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="False"
    )
    assert "/opensandbox" not in hidden["prefixes"]
    assert hidden["views"] == []


@pytest.mark.airflow_at_least("3.1", reason="the view's first Airflow line")
def test_with_the_setting_on_the_plugin_holds_the_app_and_both_views(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    from opensandbox_provider.plugins import sandboxes

    monkeypatch.setenv("AIRFLOW__OPENSANDBOX__SANDBOXES_VIEW", "True")
    try:
        reloaded = importlib.reload(sandboxes).OpenSandboxPlugin
        assert [app["url_prefix"] for app in reloaded.fastapi_apps] == ["/opensandbox"]
        assert [view["url_route"] for view in reloaded.external_views] == [
            "opensandbox-sandboxes",
            "opensandbox-task-sandboxes",
        ]
        monkeypatch.setenv("AIRFLOW__OPENSANDBOX__SANDBOXES_VIEW", "False")
        off = importlib.reload(sandboxes).OpenSandboxPlugin
        assert off.fastapi_apps == [] and off.external_views == []
    finally:
        monkeypatch.undo()
        importlib.reload(sandboxes)


def test_loading_the_plugin_imports_no_api_server_code() -> None:
    # Every Airflow process loads plugins, a task's too: the app is built on first request.
    # Only what loading the plugin adds counts: Airflow 3.0 imports FastAPI itself.
    probe = (
        "import sys, airflow.plugins_manager\n"
        "before = set(sys.modules)\n"
        "import opensandbox_provider.plugins.sandboxes\n"
        "loaded = [m for m in ('fastapi', 'opensandbox_provider.plugins._app',"
        " 'airflow.api_fastapi.core_api.security') if m in set(sys.modules) - before]\n"
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


def test_before_airflow_3_1_the_plugin_is_empty_whatever_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opensandbox_provider.plugins import sandboxes

    monkeypatch.setenv("AIRFLOW__OPENSANDBOX__SANDBOXES_VIEW", "True")
    monkeypatch.setattr(sandboxes, "airflow_version", "3.0.6")
    assert sandboxes.view_enabled() is False
    monkeypatch.setattr(sandboxes, "airflow_version", "3.1.0rc1")
    assert sandboxes.view_enabled() is True


# Resolves a real token of the installed Airflow's own auth manager through the view's _user,
# in a process of its own with a fresh database file, and prints who it found and what a
# request without a token got.
_RESOLVE = """
import asyncio, json
from airflow.api_fastapi.app import create_auth_manager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from fastapi import HTTPException
from starlette.requests import Request
from opensandbox_provider.plugins._app import _user
try:  # the table a token's revocation is looked up in, where the line has one
    from airflow.models.revoked_token import RevokedToken
    from airflow.settings import engine
    RevokedToken.__table__.create(engine, checkfirst=True)
except ImportError:
    pass
manager = create_auth_manager()
manager.init()
token = manager.generate_jwt(SimpleAuthManagerUser(username="ada", role="viewer"))
def request(headers):
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "method": "GET", "path": "/", "headers": raw, "query_string": b""}
    return Request(scope)
found = {}
ways = {"header": {"Authorization": f"Bearer {token}"}, "cookie": {"Cookie": f"_token={token}"}}
for name, headers in ways.items():
    found[name] = asyncio.run(_user(request(headers))).get_name()
try:
    asyncio.run(_user(request({})))
except HTTPException as e:
    found["none"] = e.status_code
print(json.dumps(found))
"""


@pytest.mark.airflow_at_least("3.1", reason="the view's first Airflow line")
def test_the_view_resolves_a_real_token_of_the_installed_airflow(tmp_path) -> None:
    # The view calls Airflow's own get_user directly (no public way exists); this fails on a
    # line whose get_user the call no longer fits, not as a 500 in the UI.
    settings = {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
        "AIRFLOW__CORE__AUTH_MANAGER": (
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
        ),
        "AIRFLOW__API_AUTH__JWT_SECRET": "a-secret-for-this-test-only",
        "AIRFLOW__API_AUTH__JWT_ISSUER": "opensandbox-tests",
    }
    result = subprocess.run(
        [sys.executable, "-c", _RESOLVE],
        env=os.environ | settings,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "header": "ada",
        "cookie": "ada",
        "none": 401,
    }


class _Hook:
    """A connection's hook: its server, and what it lists or raises."""

    answers: ClassVar[dict[str, object]] = {}

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id

    @property
    def server_url(self) -> str:
        return f"http://{self.conn_id}.internal:8080"

    def list_sandboxes(self, **filters: object) -> list[SandboxSummary]:
        answer = self.answers[self.conn_id]
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[return-value]

    def get_conn(self) -> _Hook:
        # Its kills come back to it through the lifecycle client made of it.
        return self

    def kill_sandbox(self, sandbox_id: str) -> None:
        _Hook.killed.append((self.conn_id, sandbox_id))

    killed: ClassVar[list[tuple[str, str]]] = []


@pytest.fixture
def view(monkeypatch: pytest.MonkeyPatch) -> Any:
    from opensandbox_provider.plugins import _app

    monkeypatch.setattr(_app, "OpenSandboxHook", _Hook)
    monkeypatch.setattr(_app, "opensandbox_connection_ids", lambda: sorted(_Hook.answers))
    monkeypatch.setattr(_app, "_allowed", lambda user, conn_id, identity, method: True)
    # The admin may read connections, the viewer may not: SimpleAuthManager's OP role rule.
    monkeypatch.setattr(_app, "_may_read_connection", lambda user, conn_id: user == "admin")
    return _app


def test_connection_details_are_shown_only_to_a_user_who_may_read_connections(view) -> None:
    task = TaskInstanceIdentity(dag_id="d", task_id="t", run_id="manual__1", try_number=1)
    _Hook.answers = {
        "os_prod": [_summary(task)],
        "os_secret": SandboxError("Could not reach http://10.9.8.7:8080: refused"),
    }
    for_viewer = view._servers("viewer", {})
    assert [(s.conn_id, s.server) for s in for_viewer] == [(None, None), (None, None)]
    assert [s.id for s in for_viewer[0].sandboxes] == ["sbx-1"]
    assert for_viewer[1].error == view.HIDDEN_ERROR
    html = render_page(for_viewer, {}, airflow_root="")
    assert "os_prod" not in html and "10.9.8.7" not in html and ".internal" not in html
    assert "api/sandboxes/sbx-1/kill" in html
    for_admin = view._servers("admin", {})
    assert [(s.conn_id, s.server) for s in for_admin] == [
        ("os_prod", "http://os_prod.internal:8080"),
        ("os_secret", None),
    ]
    assert "10.9.8.7" in str(for_admin[1].error)


def test_a_connection_that_fails_unexpectedly_is_shown_broken_and_the_rest_still_listed(
    view, caplog: pytest.LogCaptureFixture
) -> None:
    _Hook.answers = {"a_broken": KeyError("extra"), "b_fine": [_summary(None)]}
    servers = view._servers("admin", {})
    assert servers[0].conn_id == "a_broken" and servers[0].sandboxes == []
    assert "An unexpected KeyError" in str(servers[0].error)
    assert [s.id for s in servers[1].sandboxes] == ["sbx-1"]
    assert "failed unexpectedly" in caplog.text
    html = render_page(servers, {}, airflow_root="")
    assert "Could not list its sandboxes: An unexpected KeyError" in html


def test_the_page_shows_a_kept_sandbox_as_kept_until_its_time_is_up() -> None:
    now = datetime.now(UTC)
    kept = _summary(None, kept_until=now + timedelta(minutes=50, seconds=30))
    html = render_page([ServerSandboxes("os", "http://s", [kept])], {}, airflow_root="")
    assert "Running, kept (may go in 50 min)" in html
    lapsed = _summary(None, kept_until=now - timedelta(minutes=1))
    html = render_page([ServerSandboxes("os", "http://s", [lapsed])], {}, airflow_root="")
    assert "kept" not in html


def test_a_kill_from_the_view_ends_the_sandbox_on_the_server_that_lists_it(
    view, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed_through_hooks(monkeypatch)
    monkeypatch.setattr(_Hook, "killed", [])
    _Hook.answers = {"a_other": [], "b_home": [_summary(None)]}
    assert view._kill("admin", "sbx-1") == {"sandbox": "sbx-1", "killed": True}
    assert _Hook.killed == [("b_home", "sbx-1")]
