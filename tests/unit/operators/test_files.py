"""An output reaches its destination whole or not at all: a failed copy leaves what was there."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError
from airflow.providers.common.compat.sdk import AirflowException, ObjectStoragePath

from opensandbox_provider.operators._files import copy_outputs

PREVIOUS = b"yesterday's good report\n"


class Exports:
    """A backend's export: ``content`` streamed in chunks, failing after ``fail_after`` bytes."""

    def __init__(
        self, content: bytes, *, fail_after: int | None = None, claims: int | None = None
    ) -> None:
        self.content = content
        self.fail_after = fail_after
        # What the export says it wrote, when a test has it differ from what arrived.
        self.claims = claims

    def export_file(self, sandbox: str, path: str, dest: BinaryIO, *, max_bytes: int) -> int:
        for start in range(0, len(self.content), 4):
            if self.fail_after is not None and start >= self.fail_after:
                raise SandboxError(f"The download of {path!r} stopped before all of it arrived.")
            dest.write(self.content[start : start + 4])
            dest.flush()
        return len(self.content) if self.claims is None else self.claims


@pytest.fixture
def destination(tmp_path: Path) -> Path:
    path = tmp_path / "reports" / "report.txt"
    path.parent.mkdir()
    path.write_bytes(PREVIOUS)
    return path


def copy(backend: Exports, destination: Path) -> dict[str, int]:
    outputs = {"report.txt": ObjectStoragePath(f"file://{destination}")}
    return copy_outputs(backend, "sandbox-1", outputs, max_bytes=1000)  # type: ignore[arg-type]


def test_a_copy_replaces_the_previous_file_and_leaves_nothing_beside_it(destination) -> None:
    assert copy(Exports(b"today's report\n"), destination) == {"report.txt": 15}
    assert destination.read_bytes() == b"today's report\n"
    assert [path.name for path in destination.parent.iterdir()] == ["report.txt"]


def test_a_copy_cut_short_leaves_the_previous_file_and_no_partial(destination) -> None:
    with pytest.raises(SandboxError, match="stopped before all of it arrived"):
        copy(Exports(b"today's much longer report\n", fail_after=8), destination)
    assert destination.read_bytes() == PREVIOUS
    assert [path.name for path in destination.parent.iterdir()] == ["report.txt"]


def test_a_copy_the_store_kept_less_of_is_not_moved_into_place(destination) -> None:
    with pytest.raises(AirflowException, match="would hold 15 bytes of the 40"):
        copy(Exports(b"today's report\n", claims=40), destination)
    assert destination.read_bytes() == PREVIOUS
    assert [path.name for path in destination.parent.iterdir()] == ["report.txt"]


def test_a_url_target_gets_its_directory_made(tmp_path) -> None:
    target = tmp_path / "new" / "dir" / "out.bin"
    outputs = {"out.bin": f"file://{target}"}
    copy_outputs(Exports(b"\x00\x01"), "sandbox-1", outputs, max_bytes=1000)  # type: ignore[arg-type]
    assert target.read_bytes() == b"\x00\x01"
