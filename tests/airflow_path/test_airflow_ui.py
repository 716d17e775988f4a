"""A real Airflow 3 runs the system-test Dags; then a person's view of them, in headless Chromium.

One Airflow serves the module: the scheduler runs the Dags (LocalExecutor), the REST API reads
their logs, and the browser signs in, reads the task logs, watches a deferred task wait and
tests the connection. Screenshots of each page land in artifacts/browser/, whether the test
passes or not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import suppress
from datetime import timedelta

import httpx
import pytest
from opensandbox.exceptions import SandboxException
from playwright.sync_api import Locator, Page, expect

from dev.airflow_stack.running import (
    CONN_ID,
    OPERATOR_DAG,
    PASSED_LINE,
    USERNAME,
    DagRunOutcome,
    RunningAirflow,
    opensandbox_connection,
    trigger,
)
from dev.stack.state import ServerInfo
from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider._tags import CREATED_BY
from tests.airflow_path.browser import screenshot, signed_in_page
from tests.airflow_path.dags import opensandbox_deferred_ticks as ticks

# Long enough to find the task deferred, open its page and read it there, on a loaded machine.
DEFERRED_TICKS = 25
DEFER_TIMEOUT = 180.0


def test_system_test_dag_run_succeeds_in_airflow(dag_run: DagRunOutcome) -> None:
    assert dag_run.state == "success", "\n".join(dag_run.story())


def test_task_log_tells_the_sandbox_lifecycle_in_order(dag_run: DagRunOutcome) -> None:
    story = dag_run.story()
    rest = "\n".join(story)
    for expected in (
        # The sandbox is created lazily, by the first tool call.
        "Tool call 1/5: write_file",
        "Created OpenSandbox sandbox",
        "from image python:3.12-slim with no network policy (egress open)",
        "execd answered its health check",
        "Tool call 2/5: run_command",
        "Tool call 3/5: read_file",
        "Tool call 4/5: run_command",
        "Tool call 5/5: list_directory",
        "Destroyed sandbox",
        "is gone from the server after the teardown",
    ):
        assert expected in rest, f"{expected!r} missing or out of order in:\n" + "\n".join(story)
        rest = rest[rest.index(expected) + len(expected) :]
    # The Dag logs this line last, and only after every check above it passed.
    assert PASSED_LINE in rest.splitlines()


def test_operator_dag_run_succeeds_in_airflow(operator_dag_run: DagRunOutcome) -> None:
    assert operator_dag_run.state == "success", "\n".join(operator_dag_run.story())
    # Its last task logs this only once the three sandboxes' results were as expected.
    assert any(OPERATOR_DAG.passed_line in line for line in operator_dag_run.story())


@pytest.fixture(scope="module")
def page(airflow: RunningAirflow) -> Iterator[Page]:
    with signed_in_page(airflow) as page:
        yield page


def _connection_row(page: Page, airflow: RunningAirflow) -> Locator:
    page.goto(f"{airflow.site.base_url}/connections")
    return page.get_by_role("row").filter(has_text=CONN_ID)


def test_ui_task_log_shows_the_sandbox_lifecycle(
    page: Page, airflow: RunningAirflow, dag_run: DagRunOutcome
) -> None:
    page.goto(airflow.task_url(dag_run.run_id))
    with screenshot(page, "02-task-log"):
        expect(page.get_by_text("Success", exact=True).first).to_be_visible()
        for line in (
            "Created OpenSandbox sandbox",
            "with no network policy (egress open)",
            "execd answered its health check",
            "Tool call 1/5: write_file",
            "Tool call 2/5: run_command",
            "Tool call 3/5: read_file",
            "Tool call 4/5: run_command",
            "Tool call 5/5: list_directory",
            "Destroyed sandbox",
            "is gone from the server after the teardown",
            PASSED_LINE,
        ):
            expect(page.get_by_text(line).first).to_be_visible()


def test_ui_connection_form_shows_the_opensandbox_fields(
    page: Page, airflow: RunningAirflow, dag_run: DagRunOutcome
) -> None:
    # dag_run is requested for the connection it stores, which this form edits.
    _connection_row(page, airflow).get_by_role("button", name="Edit Connection").click()
    dialog = page.get_by_role("dialog")
    with screenshot(page, "03-connection-form"):
        expect(dialog.get_by_text("OpenSandbox", exact=True)).to_be_visible()
        for label in ("Server host", "Port", "Protocol", "API key"):
            expect(dialog.get_by_text(label, exact=True)).to_be_visible()
        # The provider hides the login field: OpenSandbox authenticates with the API key alone.
        expect(dialog.get_by_text("Login", exact=True)).to_have_count(0)
        dialog.get_by_role("button", name="Extra Fields", exact=True).click()
        expect(dialog.get_by_text("Request timeout (s)")).to_be_visible()
        expect(dialog.get_by_label("Use server proxy")).to_be_checked()
    page.keyboard.press("Escape")


def test_ui_test_button_passes_against_the_stack(
    page: Page, airflow: RunningAirflow, dag_run: DagRunOutcome
) -> None:
    _connection_row(page, airflow).get_by_role("button", name="Test Connection").click()
    with screenshot(page, "04-connection-test"):
        toast = page.get_by_role("status").filter(has_text="Test Connection")
        expect(toast).to_contain_text("Test Connection Successful")
        expect(toast).to_contain_text("accepted the API key")


def test_ui_a_connection_added_through_the_form_keeps_the_server_proxy_default(
    page: Page, airflow: RunningAirflow
) -> None:
    page.goto(f"{airflow.site.base_url}/connections")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    with screenshot(page, "05-add-connection"):
        dialog.get_by_label("Connection ID").fill("opensandbox_from_form")
        dialog.get_by_role("combobox", name="Connection Type").fill("OpenSandbox")
        page.keyboard.press("Enter")
        expect(dialog.get_by_text("OpenSandbox", exact=True)).to_be_visible()
        dialog.get_by_label("Server host").fill("opensandbox.example.internal")
        dialog.get_by_role("button", name="Extra Fields", exact=True).click()
        expect(dialog.get_by_text("Request timeout (s)")).to_be_visible()
        # Shown switched off until touched, yet saved as unset, which the hook reads as on.
        expect(dialog.get_by_label("Use server proxy")).not_to_be_checked()
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()
    extra = json.loads(airflow.api.connection("opensandbox_from_form")["extra"])
    # The untouched CA bundle and request fields are saved as null too, which the hook reads as
    # "no bundle" and "ask for the limits".
    assert extra == {
        "request_timeout": 30,
        "use_server_proxy": None,
        "ca_bundle": None,
        "cpu_request": None,
        "memory_request": None,
    }


def test_ui_task_log_shows_the_operator_commands_output_lines(
    page: Page, airflow: RunningAirflow, operator_dag_run: DagRunOutcome
) -> None:
    run_id = operator_dag_run.run_id
    dag_id = OPERATOR_DAG.dag_id
    page.goto(airflow.task_url(run_id, dag_id=dag_id, task_id="run_script"))
    with screenshot(page, "06-operator-task-log"):
        expect(page.get_by_text("Success", exact=True).first).to_be_visible()
        # The command is the Dag's script file, rendered; the log quotes its beginning.
        ran = re.compile(r"Loaded by the operator as a script file .* exited 0 in")
        expect(page.get_by_text(ran).first).to_be_visible()
        # The script's one line of output, a line of the log of its own, marked as the
        # command's: "[...] INFO - [sandbox stdout] 3".
        expect(page.get_by_text(re.compile(r" - \[sandbox stdout\] 3$")).first).to_be_visible()
    page.goto(airflow.task_url(run_id, dag_id=dag_id, task_id="long_command"))
    with screenshot(page, "07-operator-deferred-task-log"):
        expect(page.get_by_text("Success", exact=True).first).to_be_visible()
        # The deferred command's lines, logged by the trigger, in the same task log.
        for line in ("in the background as", "tick 1", "tick 2", "tick 3", "ended: exit code 0"):
            expect(page.get_by_text(line).first).to_be_visible()


def test_ui_shows_a_deferred_task_deferred_while_its_command_runs_then_successful(
    page: Page, airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = airflow.api
    run_id = trigger(airflow, plain_server, ticks.DAG_ID, conf={"seconds": DEFERRED_TICKS})
    api.wait_for_task_state(ticks.DAG_ID, run_id, ticks.TASK_ID, "deferred", timeout=DEFER_TIMEOUT)
    url = airflow.task_url(run_id, dag_id=ticks.DAG_ID, task_id=ticks.TASK_ID)
    page.goto(url)
    with screenshot(page, "08-deferred-task"):
        expect(page.get_by_text("Deferred", exact=True).first).to_be_visible()
        # Lines the command printed while the task waits in the triggerer are in its log.
        expect(page.get_by_text("tick 2").first).to_be_visible()
    # Still waiting after the page showed it so: the page did not show a stale state.
    assert api.task_instances(ticks.DAG_ID, run_id)[ticks.TASK_ID]["state"] == "deferred"

    assert api.wait_for_run(ticks.DAG_ID, run_id, timeout=DEFER_TIMEOUT) == "success"
    page.goto(url)
    with screenshot(page, "09-deferred-task-done"):
        expect(page.get_by_text("Success", exact=True).first).to_be_visible()
        expect(page.get_by_text(f"tick {DEFERRED_TICKS}").first).to_be_visible()
        expect(page.get_by_text("ended: exit code 0").first).to_be_visible()
    assert api.return_value(ticks.DAG_ID, run_id, ticks.TASK_ID) == {
        "exit_code": 0,
        "stdout": ticks.expected_stdout(DEFERRED_TICKS),
    }


# ----------------------------------------------------------------------
# The Sandboxes view (opensandbox_provider.plugins)
# ----------------------------------------------------------------------

VIEWER = "viewer"
LEAKED_IDENTITY = TaskInstanceIdentity(
    dag_id="opensandbox_long_gone", task_id="lost", run_id="manual__2026-01-01", try_number=1
)


def _sandbox_of(server: ServerInfo, deployment: str) -> Iterator[str]:
    """A sandbox as a dead worker of ``deployment`` leaves one: made by this provider for a task
    long ended."""
    from opensandbox import SandboxSync

    sandbox = SandboxSync.create(
        "python:3.12-slim",
        connection_config=server.connection_config(),
        metadata={**CREATED_BY, DEPLOYMENT_KEY: deployment, **LEAKED_IDENTITY.metadata()},
        timeout=timedelta(minutes=10),
        skip_health_check=True,
    )
    try:
        yield sandbox.id
    finally:
        with suppress(SandboxException):
            sandbox.kill()
        sandbox.close()


@pytest.fixture
def leaked_sandbox(airflow: RunningAirflow, plain_server: ServerInfo) -> Iterator[str]:
    """A sandbox this Airflow's dead worker left."""
    airflow.api.put_connection(opensandbox_connection(plain_server))
    yield from _sandbox_of(plain_server, airflow.api.opensandbox_deployment())


@pytest.fixture
def foreign_sandbox(plain_server: ServerInfo) -> Iterator[str]:
    """The same task instance's sandbox, left by another Airflow deployment on the server."""
    yield from _sandbox_of(plain_server, "another-deployment")


def _token(airflow: RunningAirflow, username: str) -> str:
    password = json.loads(airflow.site.password_file.read_text())[username]
    answer = httpx.post(
        f"{airflow.site.base_url}/auth/token", json={"username": username, "password": password}
    )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def test_the_sandboxes_view_refuses_anonymous_requests_and_a_viewers_kill(
    airflow: RunningAirflow, plain_server: ServerInfo, leaked_sandbox: str, foreign_sandbox: str
) -> None:
    base = f"{airflow.site.base_url}/opensandbox"
    kill = f"{base}/api/sandboxes/{leaked_sandbox}/kill"
    action = {"X-OpenSandbox-Action": "kill"}
    assert httpx.get(f"{base}/sandboxes").status_code == 401
    assert httpx.get(f"{base}/api/sandboxes").status_code == 401
    assert httpx.post(kill, headers=action).status_code == 401

    viewer = {"Authorization": f"Bearer {_token(airflow, VIEWER)}"}
    listing = httpx.get(f"{base}/api/sandboxes", headers=viewer)
    assert listing.status_code == 200, listing.text
    listed = [s["id"] for server in listing.json() for s in server["sandboxes"]]
    assert leaked_sandbox in listed and foreign_sandbox not in listed
    # A viewer may not read connections: no connection id, server or error reaches them.
    assert all(server["conn_id"] is None and server["server"] is None for server in listing.json())
    assert plain_server.domain not in listing.text
    refused = httpx.post(kill, headers=viewer | action)
    assert refused.status_code == 403, refused.text
    assert plain_server.has_sandbox(leaked_sandbox)
    # Whatever the page says, it never carries the connection's API key.
    assert plain_server.api_key not in listing.text
    assert plain_server.api_key not in httpx.get(f"{base}/sandboxes", headers=viewer).text

    admin = {"Authorization": f"Bearer {_token(airflow, USERNAME)}"}
    without_header = httpx.post(kill, headers=admin)
    assert without_header.status_code == 400, without_header.text
    assert plain_server.has_sandbox(leaked_sandbox)
    for_admin = httpx.get(f"{base}/api/sandboxes", headers=admin).json()
    assert CONN_ID in [server["conn_id"] for server in for_admin]
    # Another deployment's sandbox of the same task instance is not this one's to kill.
    foreign = httpx.post(f"{base}/api/sandboxes/{foreign_sandbox}/kill", headers=admin | action)
    assert foreign.status_code == 404, foreign.text
    assert plain_server.has_sandbox(foreign_sandbox)


def test_ui_sandboxes_view_shows_a_deferred_tasks_sandbox_and_kills_a_leaked_one(
    page: Page, airflow: RunningAirflow, plain_server: ServerInfo, leaked_sandbox: str
) -> None:
    api = airflow.api
    run_id = trigger(airflow, plain_server, ticks.DAG_ID, conf={"seconds": DEFERRED_TICKS})
    api.wait_for_task_state(ticks.DAG_ID, run_id, ticks.TASK_ID, "deferred", timeout=DEFER_TIMEOUT)
    running = api.xcom(ticks.DAG_ID, run_id, ticks.TASK_ID, key="sandbox_id")

    page.goto(f"{airflow.site.base_url}/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Sandboxes").click()
    view = page.frame_locator("iframe")
    with screenshot(page, "10-sandboxes-view"):
        expect(view.get_by_text(running)).to_be_visible()
        expect(view.get_by_text(leaked_sandbox)).to_be_visible()
        owner = view.get_by_role("row").filter(has_text=running)
        expect(owner.get_by_role("link", name=re.compile(ticks.TASK_ID))).to_be_visible()
    leaked_row = view.get_by_role("row").filter(has_text=leaked_sandbox)
    leaked_row.get_by_role("button", name="Kill").click()
    # Nothing happens before the second click confirms it.
    assert plain_server.has_sandbox(leaked_sandbox)
    leaked_row.get_by_role("button", name="Confirm kill").click()
    with screenshot(page, "11-sandboxes-view-after-kill"):
        expect(view.get_by_text(leaked_sandbox)).to_have_count(0)
        expect(view.get_by_text(running)).to_be_visible()
    assert not plain_server.has_sandbox(leaked_sandbox)
    # The owner's link opens its task instance in the UI, not inside the frame.
    owner.get_by_role("link", name=re.compile(ticks.TASK_ID)).click()
    page.wait_for_url(re.compile(rf"/dags/{ticks.DAG_ID}/runs/.+/tasks/{ticks.TASK_ID}"))
    # The deferred task's sandbox was left alone: its task ends as it would have.
    assert api.wait_for_run(ticks.DAG_ID, run_id, timeout=DEFER_TIMEOUT) == "success"
