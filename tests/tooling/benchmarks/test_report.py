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


NO_CLUSTER = {"unavailable": "not measured: the local cluster is not up (`make kube-server-up`)"}


def _executor_case(
    warm_median: float, *, celery: dict | None = None, kubernetes: dict = NO_CLUSTER
) -> dict:
    """Case (h) with LocalExecutor's queued-to-running median at 1 s."""

    def spans(median: float) -> dict:
        stats = {"median_s": median, "p95_s": median * 2, "n": 30}
        return {"queued_to_running": stats, "queued_to_success": stats}

    return {
        "executor": {
            "warm": {**spans(warm_median), "from_pool": 30},
            "cold": spans(4.0),
            "local": spans(1.0),
            "celery": celery if celery is not None else spans(1.5),
            "kubernetes": kubernetes
            if "unavailable" in kubernetes
            else spans(kubernetes["median"]),
        }
    }


def test_the_executor_from_a_warm_pool_is_held_to_twice_localexecutors_median() -> None:
    met, missed = build_rows(_executor_case(2.0)), build_rows(_executor_case(2.1))
    headline = "[h] OpenSandboxExecutor from a warm pool: queued to running, median of 30"
    assert shortfalls(met) == []
    assert shortfalls(missed) == [f"{headline}: ours <= 2x LocalExecutor's median (1.00 s) NOT MET"]
    # Each executor's two spans, median and p95: 16 rows, each executor's values its own.
    assert len(met) == 16
    values = {row.title: row.values["ours"] for row in met}
    assert values["OpenSandboxExecutor cold: queued to success, p95 of 30"] == 8.0
    assert (
        values["CeleryExecutor, the celery topology's workers: queued to running, median of 30"]
        == 1.5
    )
    # Without the local cluster, KubernetesExecutor has no rows, and its goal says it was not
    # measured, which fails nothing.
    verdicts = dict(met[0].verdicts())
    kubernetes_goal = "ours <= 1/5 of KubernetesExecutor's median (n/a)"
    assert verdicts[kubernetes_goal].startswith("not measured: the local cluster is not up")


def test_the_executor_from_a_warm_pool_is_held_to_a_fifth_of_kubernetes_executors_median() -> None:
    met = build_rows(_executor_case(2.0, kubernetes={"median": 10.0}))
    missed = build_rows(_executor_case(2.0, kubernetes={"median": 9.0}))
    headline = "[h] OpenSandboxExecutor from a warm pool: queued to running, median of 30"
    assert shortfalls(met) == []
    assert shortfalls(missed) == [
        f"{headline}: ours <= 1/5 of KubernetesExecutor's median (9.00 s) NOT MET"
    ]
    # Its four rows join the others'.
    assert len(met) == 20
    values = {row.title: row.values["ours"] for row in met}
    assert (
        values["KubernetesExecutor, pods on the local cluster: queued to running, median of 30"]
        == 10.0
    )


def test_an_executor_without_a_result_fails_the_run_naming_its_rows() -> None:
    rows = build_rows(_executor_case(1.5, celery={"error": "run as root"}))
    missed = shortfalls(rows)
    assert len(missed) == 4
    assert all(line.startswith("[h] CeleryExecutor") for line in missed), missed
    assert all(line.endswith("no result for ours") for line in missed), missed
