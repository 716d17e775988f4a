"""
How OpenSandboxOperator's task ends when something goes wrong around the command: files it
cannot copy in. The backend records what it is asked.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import (
    SandboxError,
    SandboxExecResult,
)
from airflow.providers.common.compat.sdk import AirflowException, Asset, ObjectStoragePath

from opensandbox_provider.operators import opensandbox as operator_module
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

LOG = logging.getLogger("tests.operator_failures")


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
        self.calls.append("hold")

    def recheck_policy(self, sandbox: str, spec: Any, *, after: str) -> None:
        self.calls.append("recheck_policy")


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Backend:
    # The operator reads its connection before it creates (for on_kill); nothing is sent to it.
    connection = {"conn_type": "opensandbox", "host": "127.0.0.1", "port": 9, "password": "k"}
    monkeypatch.setenv("AIRFLOW_CONN_OPENSANDBOX_DEFAULT", json.dumps(connection))
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
    made = operator(files={"ok.txt": "fine", "in.csv": source})
    with pytest.raises(AirflowException) as raised:
        made.execute({})  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"files['in.csv'] is a {kind}; give text, bytes, an ObjectStoragePath or an Asset to "
        "copy in."
    )
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
        "run_command",
        "destroy",
    ]
