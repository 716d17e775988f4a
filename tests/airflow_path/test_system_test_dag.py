"""The system-test Dag run by a real Airflow 3 (scheduler, LocalExecutor, api-server)."""

from __future__ import annotations

from tests.airflow_stack.running import PASSED_LINE, DagRunOutcome


def test_system_test_dag_run_succeeds_in_airflow(dag_run: DagRunOutcome) -> None:
    assert dag_run.state == "success", "\n".join(dag_run.story())


def test_task_log_tells_the_sandbox_lifecycle_in_order(dag_run: DagRunOutcome) -> None:
    story = dag_run.story()
    rest = "\n".join(story)
    for expected in (
        "Created OpenSandbox sandbox",
        "from image python:3.12-slim with no network policy (egress open)",
        "execd answered its health check",
        "Tool call 1/5: write_file",
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
