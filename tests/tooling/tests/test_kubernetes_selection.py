"""A run against the Kubernetes runtime holds the server-facing folders and files only."""

from __future__ import annotations

from tests.kubernetes_selection import on_kubernetes


def test_a_kept_folder_keeps_its_files_and_a_kept_file_only_itself() -> None:
    assert on_kubernetes("tests/integration/test_commands.py::test_echo[direct]")
    assert on_kubernetes("tests/airflow_path/test_operator_dag.py::test_runs")
    assert not on_kubernetes("tests/airflow_path/test_deferral.py::test_defers")
    assert not on_kubernetes("tests/unit/test_stream.py::test_lines")
    # A folder's name is not a prefix of another's.
    assert not on_kubernetes("tests/integration_extra/test_x.py::test_y")
