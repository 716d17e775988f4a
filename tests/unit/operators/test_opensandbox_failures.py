"""
How OpenSandboxOperator's task ends when something goes wrong around the command: files it
cannot copy in, a sandbox that ends under the command, and a destroy that fails. The backend
records what it is asked.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import (
    SandboxError,
    SandboxExecResult,
    SandboxTerminalError,
)
from airflow.providers.common.compat.sdk import AirflowException, Asset, ObjectStoragePath

from opensandbox_provider.operators import opensandbox as operator_module
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

LOG = logging.getLogger("tests.operator_failures")
ABANDONED = (
    "partial warning\n"
    "The command was abandoned: the sandbox sent nothing for 60s, not even execd's heartbeat, "
    "and execd did not answer a ping within 10s. The sandbox was destroyed.\n"
)
ENDED_UNDER_IT = (
    "Sandbox sbx ended while the command ran: it was destroyed, killed or reached the end of "
    "its lifetime on the server."
)


class Backend:
    """
    Records every call; the sandbox is ``sbx``. ``result`` is what the command returns, or
    the error it raises; ``destroy_fails`` makes the destroy raise.
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.result: SandboxExecResult | Exception = SandboxExecResult(0, "done\n", "")
        self.destroy_fails = False

    def create(self, *, spec: Any) -> str:
        self.calls.append("create")
        return "sbx"

    def write_file(self, sandbox: str, path: str, content: bytes) -> None:
        self.calls.append(f"write_file {path}")

    def run_command(self, sandbox: str, command: str, **options: Any) -> SandboxExecResult:
        self.calls.append("run_command")
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def destroy(self, sandbox: str) -> None:
        self.calls.append("destroy")
        if self.destroy_fails:
            raise SandboxError("Could not destroy sandbox sbx: HTTP 503 from the server.")

    def hold(self, sandbox: str) -> None:
        # Also the graceful stop's backend (this same double), holding the sandbox while the
        # command runs and handing it over when the task ends.
        self.calls.append("hold")

    def hand_over(self, sandbox: str) -> None:
        self.calls.append("hand_over")


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, default_connection: None) -> Backend:
    monkeypatch.setattr(OpenSandboxOperator, "log", property(lambda self: LOG))

    def copy_outputs(*args: object, **kwargs: object) -> dict:
        raise AssertionError("outputs were copied from a command that did not succeed")

    monkeypatch.setattr(operator_module, "copy_outputs", copy_outputs)
    made = Backend()
    monkeypatch.setattr(OpenSandboxOperator, "new_backend", lambda self: made)
    return made


def operator(**arguments: Any) -> OpenSandboxOperator:
    return OpenSandboxOperator(task_id="t", command="make it", **arguments)


# ---------------------------------------------------------------------------
# Files refused before any sandbox is created
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "kind"), [(42, "int"), (Path("/data/in.csv"), "PosixPath"), (None, "NoneType")]
)
def test_a_file_of_a_type_that_cannot_be_copied_in_is_refused_before_any_sandbox(
    backend, source, kind
) -> None:
    message = (
        f"files['in.csv'] is a {kind}; give text, bytes, an ObjectStoragePath or an Asset to "
        "copy in."
    )
    # Given in the Dag, it fails the Dag's parse; rendered from an upstream task's output, it
    # fails the task before any sandbox.
    with pytest.raises(ValueError) as refused:
        operator(files={"ok.txt": "fine", "in.csv": source})
    assert str(refused.value) == message
    made = operator(files={"ok.txt": "fine"})
    made.files["in.csv"] = source
    with pytest.raises(AirflowException) as raised:
        made.execute({})  # type: ignore[arg-type]
    assert str(raised.value) == message
    assert backend.calls == []


def too_large(path: str, origin: str) -> str:
    return (
        f"files[{path!r}] is larger than max_file_bytes (10 bytes), read from {origin}. Raise "
        "max_file_bytes, or fetch the file from inside the sandbox."
    )


def test_bytes_over_max_file_bytes_are_refused_before_any_sandbox(backend) -> None:
    made = operator(files={"raw.bin": b"x" * 11}, max_file_bytes=10)
    with pytest.raises(AirflowException) as raised:
        made.execute({})  # type: ignore[arg-type]
    assert str(raised.value) == too_large("raw.bin", "its bytes")
    assert backend.calls == []


def test_text_is_held_to_max_file_bytes_by_its_utf8_bytes_not_its_characters(backend) -> None:
    # Six characters, twelve bytes: the sandbox receives the bytes.
    made = operator(files={"name.txt": "é" * 6}, max_file_bytes=10)
    with pytest.raises(AirflowException) as raised:
        made.execute({})  # type: ignore[arg-type]
    assert str(raised.value) == too_large("name.txt", "its text")
    assert backend.calls == []


@pytest.mark.parametrize("given_as", ["path", "asset"])
def test_a_stored_file_over_max_file_bytes_is_refused_before_any_sandbox(
    backend, tmp_path, given_as
) -> None:
    stored = tmp_path / "big.csv"
    stored.write_bytes(b"x" * 11)
    url = f"file://{stored}"
    source = ObjectStoragePath(url) if given_as == "path" else Asset(uri=url)
    made = operator(files={"big.csv": source}, max_file_bytes=10)
    with pytest.raises(AirflowException) as raised:
        made.execute({})  # type: ignore[arg-type]
    assert str(raised.value) == too_large("big.csv", url)
    assert backend.calls == []


def test_files_at_max_file_bytes_go_in_after_the_sandbox_is_created(backend, tmp_path) -> None:
    # The double above refuses nothing itself: files within the bound reach the sandbox.
    stored = tmp_path / "exact.csv"
    stored.write_bytes(b"y" * 10)
    files = {"a.bin": b"x" * 10, "b.txt": "é" * 5, "c.csv": ObjectStoragePath(f"file://{stored}")}
    assert operator(files=files, max_file_bytes=10).execute({}) == {  # type: ignore[arg-type]
        "exit_code": 0,
        "stdout": "done\n",
    }
    assert backend.calls == [
        "create",
        "write_file a.bin",
        "write_file b.txt",
        "write_file c.csv",
        "hold",
        "run_command",
        "hand_over",
        "destroy",
    ]


# ---------------------------------------------------------------------------
# A sandbox that ends under the command
# ---------------------------------------------------------------------------


def test_a_sandbox_destroyed_to_end_a_stalled_command_fails_the_task_saying_why(backend) -> None:
    # What the backend returns once it gave up on a command's stream and destroyed its sandbox.
    backend.result = SandboxExecResult(
        exit_code=-1,
        stdout="partial\n",
        stderr=ABANDONED,
        timed_out=True,
        sandbox_terminated=True,
    )
    with pytest.raises(AirflowException) as raised:
        operator(outputs={"/o": "file:///tmp/nowhere"}).execute({})  # type: ignore[arg-type]
    # Not the message of a command that ran out of its own time, though the result says so.
    assert str(raised.value) == ABANDONED.strip()
    assert backend.calls == ["create", "hold", "run_command", "hand_over", "destroy"]


def test_a_sandbox_that_ended_while_the_command_ran_fails_the_task_with_the_servers_word(
    backend,
) -> None:
    backend.result = SandboxTerminalError(ENDED_UNDER_IT)
    with pytest.raises(SandboxTerminalError) as raised:
        operator(outputs={"/o": "file:///tmp/nowhere"}).execute({})  # type: ignore[arg-type]
    assert str(raised.value) == ENDED_UNDER_IT
    # Destroyed all the same: "ended" may be a sandbox the server still holds, stopped.
    assert backend.calls == ["create", "hold", "run_command", "hand_over", "destroy"]


# ---------------------------------------------------------------------------
# A destroy that fails
# ---------------------------------------------------------------------------


def destroy_warnings(caplog) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == LOG.name and record.getMessage().startswith("Could not destroy")
    ]


def test_a_failed_destroy_is_logged_with_its_cause_and_the_result_still_returned(
    backend, caplog
) -> None:
    backend.destroy_fails = True
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        result = operator().execute({})  # type: ignore[arg-type]
    assert result == {"exit_code": 0, "stdout": "done\n"}
    [warning] = destroy_warnings(caplog)
    assert warning.getMessage() == (
        "Could not destroy sandbox sbx; the server ends it when its lease of 3600s runs out."
    )
    assert warning.exc_info is not None and "HTTP 503" in str(warning.exc_info[1])


def test_a_failed_destroy_does_not_hide_why_the_command_failed(backend, caplog) -> None:
    backend.destroy_fails = True
    backend.result = SandboxExecResult(2, "", "Traceback: boom\n")
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        with pytest.raises(AirflowException) as raised:
            operator().execute({})  # type: ignore[arg-type]
    assert str(raised.value) == (
        "The command exited 2 in sandbox sbx. The last lines of its stderr:\nTraceback: boom"
    )
    assert len(destroy_warnings(caplog)) == 1


def test_back_from_the_trigger_a_failed_destroy_does_not_hide_the_events_error(
    backend, caplog
) -> None:
    backend.destroy_fails = True
    event = {"status": "error", "sandbox": "sbx", "message": "execd lost the command"}
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        with pytest.raises(AirflowException) as raised:
            operator(deferrable=True).execute_complete({}, event)  # type: ignore[arg-type]
    assert str(raised.value) == "execd lost the command"
    assert backend.calls == ["destroy"]
    assert len(destroy_warnings(caplog)) == 1
