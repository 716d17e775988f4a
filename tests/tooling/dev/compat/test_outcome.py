"""The compatibility matrix's runner (dev/compat) reads pytest and reports as it says."""

from __future__ import annotations

import json

import pytest

from dev.compat import report, stack_phase
from dev.compat.combinations import COMBINATIONS, select
from dev.compat.outcome import CheckOutcome, describe_counts, pytest_counts


def test_pytests_closing_line_becomes_counts() -> None:
    output = "FAILED tests/x.py::y\n3 failed, 527 passed, 2 skipped, 1 error in 131.85s (0:02:11)"
    assert pytest_counts(output) == {"failed": 3, "passed": 527, "skipped": 2, "errors": 1}
    assert describe_counts(pytest_counts(output)) == "3 failed, 527 passed, 2 skipped, 1 errors"


def test_output_without_a_closing_line_has_no_counts() -> None:
    assert pytest_counts("Traceback (most recent call last):\nImportError: x\n") == {}
    assert describe_counts({}) == "no pytest summary"


def test_the_matrix_is_every_airflow_line_with_every_sdk_and_the_extra_lanes() -> None:
    names = [combination.name for combination in COMBINATIONS]
    assert len(names) == len(set(names)) == 14
    assert "airflow-2.11-sdk-1.1.0" in names and "airflow-3.3-sdk-1.1.1" in names
    assert {"airflow-3.3-sdk-1.1.1-py3.12", "airflow-3.3-sdk-1.1.1-py3.13", "floors"} <= set(names)
    (early,) = [c for c in COMBINATIONS if not c.gating]
    assert early.name == "early-airflow-3.4.0b2-sdk-1.1.1-common-ai-1.1.0rc1"


def test_an_unknown_combination_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="airflow-3.3-sdk-1.1.1"):
        select(["airflow-9.9-sdk-0"])


def test_a_stack_phase_that_never_ran_fails_both_stack_checks(tmp_path, monkeypatch) -> None:
    (combination,) = select(["airflow-3.3-sdk-1.1.1"])
    monkeypatch.setattr(type(combination), "env", property(lambda self: tmp_path))
    outcomes = stack_phase.run_in_turn(combination, "false")
    assert [(o.check, o.passed) for o in outcomes] == [("agent", False), ("attach_dag", False)]
    assert all(o.summary == "the stack phase did not finish" for o in outcomes)


def test_the_table_and_the_artifact_say_which_check_failed(tmp_path) -> None:
    (combination,) = select(["airflow-3.3-sdk-1.1.1"])
    results = {
        combination: [
            CheckOutcome("unit", True, 61.2, "530 passed"),
            CheckOutcome("agent", False, 15.0, "1 failed", "AssertionError"),
        ]
    }
    table = report.table(results)
    assert "pass 61s" in table and "FAIL 15s" in table and combination.name in table
    written = json.loads(report.write_artifact(results, tmp_path / "compat.json").read_text())
    (row,) = written["combinations"]
    assert row["passed"] is False and row["gating"] is True and row["python"] == "3.11"
    assert row["versions"]["apache-airflow"].startswith("3.3.")
    assert row["checks"][1]["tail"] == "AssertionError"
    assert row["commit"] and row["date"]
    assert report.gating_passed(results) is False


def test_a_combination_run_again_replaces_only_its_own_row(tmp_path) -> None:
    first, second = select(["airflow-3.2-sdk-1.1.1", "airflow-3.3-sdk-1.1.1"])
    artifact = tmp_path / "compat.json"
    report.write_artifact(
        {
            first: [CheckOutcome("unit", True, 1.0, "1 passed")],
            second: [CheckOutcome("unit", False, 1.0, "1 failed")],
        },
        artifact,
    )
    report.write_artifact(
        {second: [CheckOutcome("unit", True, 2.0, "2 passed")]}, artifact, keep_others=True
    )
    rows = json.loads(artifact.read_text())["combinations"]
    assert [(r["combination"], r["passed"]) for r in rows] == [
        (first.name, True),
        (second.name, True),
    ]
    table = report.rst_table(json.loads(artifact.read_text()))
    assert "every check of every gating combination passed" in table
    assert "pass, 2 s (2 passed)" in table


def test_the_early_warning_lane_is_recorded_but_does_not_gate() -> None:
    (early,) = [c for c in COMBINATIONS if not c.gating]
    (gating,) = select(["airflow-3.3-sdk-1.1.1"])
    results = {
        gating: [CheckOutcome("unit", True, 1.0, "1 passed")],
        early: [CheckOutcome("unit", False, 1.0, "1 failed", "ImportError")],
    }
    assert report.gating_passed(results) is True
