"""``make bench`` fails, naming the rows, when a goal is not met or ours has no result."""

from __future__ import annotations

from benchmarks.report import Row, at_most, exit_status, shortfalls
from benchmarks.rows import build_rows


def timings(ours: dict, sdk: float = 1.0) -> dict:
    """Cases (a) and (b) with ours timed as given and the SDK at ``sdk`` seconds."""
    return {
        case: {"ours": ours, "built-in": {"median_s": 3.0}, "sdk": {"median_s": sdk}}
        for case in ("create_destroy", "echo")
    }


def test_a_run_that_meets_every_goal_exits_0(capsys) -> None:
    rows = build_rows(timings({"median_s": 0.2}))
    assert shortfalls(rows) == []
    assert exit_status(rows) == 0
    assert "every goal met" in capsys.readouterr().out


def test_a_goal_not_met_fails_the_run_naming_the_row_and_the_goal(capsys) -> None:
    rows = build_rows({"echo": timings({"median_s": 0.5}, sdk=0.4)["echo"]})
    assert shortfalls(rows) == [
        "[b] `echo hi`, median of 50: ours/sdk <= 1.05 NOT MET",
        "[b] `echo hi`, median of 50: ours <= 0.25 s NOT MET",
    ]
    assert exit_status(rows) == 1
    printed = capsys.readouterr().err
    assert "bench: FAILED, 2 shortfall(s):" in printed
    assert "[b] `echo hi`, median of 50: ours <= 0.25 s NOT MET" in printed


def test_a_row_with_no_result_for_ours_fails_the_run(capsys) -> None:
    rows = build_rows(timings({"error": "the sandbox did not start"}, sdk=1.0))
    assert shortfalls(rows) == [
        "[a] create + destroy, median of 20: no result for ours",
        "[b] `echo hi`, median of 50: no result for ours",
    ]
    assert exit_status(rows) == 1


def test_a_goal_the_others_cannot_be_judged_on_does_not_fail_the_run() -> None:
    # No SDK result: the ratio goal is n/a, which says nothing against ours.
    row = Row("b", "echo", "s", {"ours": 0.1, "sdk": None}, goals=[at_most(0.25, "s")])
    assert shortfalls([row]) == []
    raw = {"echo": {"ours": {"median_s": 0.1}, "sdk": {"error": "refused"}}}
    assert [verdict for _, verdict in build_rows(raw)[0].verdicts()] == ["n/a", "met"]
    assert shortfalls(build_rows(raw)) == []
