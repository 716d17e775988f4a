"""An operator's outputs are its outlets and its stored inputs its inlets, as Airflow declares
assets; an Asset may stand where a path does."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import Asset, ObjectStoragePath

from opensandbox_provider.operators._files import copy_outputs, write_files
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from tests.unit.operators.test_files import Exports
from tests.unit.operators.test_opensandbox_templating import in_a_dag, rendered


@pytest.mark.airflow_at_least(
    "3.0", reason="Airflow 2's Dataset, which Asset names there, has no name"
)
def test_each_fixed_destination_of_outputs_is_an_outlet() -> None:
    operator = OpenSandboxOperator(
        task_id="t",
        command="true",
        outputs={
            "a.csv": ObjectStoragePath("file:///data/a.csv"),
            "b.csv": "file:///data/b.csv",
            "c.csv": Asset(uri="file:///data/c.csv", name="c"),
        },
    )
    assert [asset.uri for asset in operator.outlets] == [
        "file:///data/a.csv",
        "file:///data/b.csv",
        "file:///data/c.csv",
    ]
    assert operator.outlets[2].name == "c"


def test_a_templated_destination_declares_no_asset_since_an_asset_is_fixed() -> None:
    operator = OpenSandboxOperator(
        task_id="t", command="true", outputs={"r.csv": "file:///data/{{ ds }}/r.csv"}
    )
    assert operator.outlets == []


def test_an_object_stores_connection_id_is_not_part_of_its_asset() -> None:
    operator = OpenSandboxOperator(
        task_id="t",
        command="true",
        outputs={"r.csv": ObjectStoragePath("s3://aws_default@bucket/reports/r.csv")},
    )
    assert [asset.uri for asset in operator.outlets] == ["s3://bucket/reports/r.csv"]


def test_outlets_the_dag_author_gave_are_kept_and_not_repeated() -> None:
    given = Asset(uri="file:///data/a.csv")
    other = Asset(uri="file:///data/other.csv")
    operator = OpenSandboxOperator(
        task_id="t",
        command="true",
        outputs={"a.csv": "file:///data/a.csv"},
        outlets=[other, given],
    )
    assert operator.outlets == [other, given]


def test_stored_files_are_inlets_and_text_to_copy_in_is_none() -> None:
    operator = OpenSandboxOperator(
        task_id="t",
        command="true",
        files={
            "in.csv": ObjectStoragePath("file:///data/in.csv"),
            "ref.csv": Asset(uri="file:///data/ref.csv"),
            # Text that happens to hold a URL is content, not a location.
            "notes.txt": "see file:///data/notes.txt",
            "raw.bin": b"file:///data/raw.bin",
        },
    )
    assert [asset.uri for asset in operator.inlets] == [
        "file:///data/in.csv",
        "file:///data/ref.csv",
    ]


def test_an_asset_destination_survives_rendering_and_receives_the_output(tmp_path: Path) -> None:
    target = tmp_path / "out" / "r.csv"
    operator = rendered(in_a_dag(command="true", outputs={"r.csv": Asset(uri=f"file://{target}")}))
    copied = copy_outputs(Exports(b"a,b\n"), "sandbox-1", operator.outputs, max_bytes=100)  # type: ignore[arg-type]
    assert copied == {"r.csv": 4}
    assert target.read_bytes() == b"a,b\n"


def test_an_asset_source_is_copied_in_by_its_content(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"x,y\n")
    written: dict[str, bytes] = {}

    class Writes:
        def write_file(self, sandbox: str, path: str, content: bytes) -> None:
            written[path] = content

    files = {"in.csv": Asset(uri=f"file://{source}")}
    write_files(Writes(), "sandbox-1", files, max_bytes=100)  # type: ignore[arg-type]
    assert written == {"in.csv": b"x,y\n"}
