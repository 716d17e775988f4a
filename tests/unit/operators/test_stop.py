"""The graceful stop's shell, run here against real local processes under sh, and the checks
a Dag author meets when the Dag is parsed: termination_grace_period, on_finish_action and
keep_for."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxExecResult
from airflow.providers.common.compat.sdk import dag, task

from opensandbox_provider.operators._finish_action import keeps
from opensandbox_provider.operators._stop import Stop, recording_group, stop_gracefully
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator


class LocalShell:
    """A backend double that runs each command in this machine's sh, as execd runs it."""

    def run_command(self, sandbox: str, command: str, **options: object) -> SandboxExecResult:
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
        return SandboxExecResult(done.returncode, done.stdout, done.stderr)


def started(command: str, group: Path) -> subprocess.Popen[bytes]:
    """``command`` run as execd runs one: a shell leading a process group of its own."""
    process = subprocess.Popen(
        ["bash", "-c", recording_group(command, str(group))], process_group=0
    )
    deadline = time.monotonic() + 10
    while not group.exists() or not group.read_text().strip():
        assert time.monotonic() < deadline, "the command never recorded its process group"
        time.sleep(0.02)
    return process


def test_a_command_that_traps_sigterm_finishes_its_handler_and_is_reported_stopped(
    tmp_path: Path,
) -> None:
    group, marker = tmp_path / "pgid", tmp_path / "marker"
    process = started(f"trap 'echo flushed >{marker}; exit 0' TERM; sleep 300 & wait", group)
    stop = stop_gracefully(LocalShell(), "local", str(group), grace=10)  # type: ignore[arg-type]
    process.wait(10)
    assert stop.how == "terminated" and stop.after < 10
    assert marker.read_text() == "flushed\n"
    assert str(stop).startswith("stopped by SIGTERM after ")


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    group = tmp_path / "pgid"
    process = started("trap '' TERM; sleep 300", group)
    began = time.monotonic()
    stop = stop_gracefully(LocalShell(), "local", str(group), grace=1)  # type: ignore[arg-type]
    process.wait(10)
    assert stop == Stop("killed", 1, 1) and time.monotonic() - began >= 1
    assert str(stop) == "killed after the grace of 1s, since it outlived SIGTERM"


def test_a_grace_of_0_kills_at_once(tmp_path: Path) -> None:
    group = tmp_path / "pgid"
    process = started("trap 'exit 0' TERM; sleep 300 & wait", group)
    stop = stop_gracefully(LocalShell(), "local", str(group), grace=0)  # type: ignore[arg-type]
    assert process.wait(10) == -9
    assert str(stop) == "killed at once (termination_grace_period is 0)"


def test_a_command_that_already_ended_is_found_ended_not_stopped(tmp_path: Path) -> None:
    group = tmp_path / "pgid"
    started("true", group).wait(10)
    stop = stop_gracefully(LocalShell(), "local", str(group), grace=5)  # type: ignore[arg-type]
    assert not stop.ended_it


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"termination_grace_period": -1}, "termination_grace_period is -1"),
        ({"termination_grace_period": "5"}, "termination_grace_period is '5'"),
        ({"on_finish_action": "keep"}, "on_finish_action is 'keep'; give one of 'delete_pod'"),
        ({"keep_for": 3600}, "keep_for is 3600; give a positive timedelta"),
        ({"keep_for": timedelta(0)}, "keep_for is"),
    ],
)
def test_a_wrong_stop_or_finish_argument_fails_when_the_dag_is_parsed(
    arguments: dict[str, object], error: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        OpenSandboxOperator(task_id="t", command="true", **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("action", "failed", "kept"),
    [
        ("delete_pod", True, False),
        ("delete_pod", False, False),
        ("delete_succeeded_pod", True, True),
        ("delete_succeeded_pod", False, False),
        ("keep_pod", True, True),
        ("keep_pod", False, True),
    ],
)
def test_on_finish_action_keeps_as_kubernetes_pod_operator_does(
    action: str, failed: bool, kept: bool
) -> None:
    assert keeps(action, failed=failed) is kept


def test_the_decorator_takes_the_grace_and_the_finish_action_as_the_operator_does() -> None:
    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        @task.opensandbox(
            termination_grace_period=30, on_finish_action="keep_pod", keep_for=timedelta(hours=2)
        )
        def inspect() -> None:
            pass

        inspect()

    made = holder().task_dict["inspect"]
    assert (made.termination_grace_period, made.on_finish_action, made.keep_for) == (
        30.0,
        "keep_pod",
        timedelta(hours=2),
    )
