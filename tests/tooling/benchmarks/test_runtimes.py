"""The runtime comparison's table: medians with their range, and the second runtime over the
first; a runtime without the feature shows a dash, not a number."""

from __future__ import annotations

from benchmarks.runtimes import ROUTES, Row, _rotating, gateway_goal, render


def test_each_runtime_shows_its_median_and_range_and_the_ratio_is_second_over_first() -> None:
    row = Row("echo", "echo", "ms", {"docker": [10.0, 20.0, 30.0], "kubernetes": [40.0, 50.0]})

    table = render([row], ("docker", "kubernetes")).splitlines()

    assert table[1].split() == ["echo", "[ms]", "20", "(10-30)", "45", "(40-50)", "2.25"]
    assert row.as_dict()["runtimes"]["kubernetes"] == {
        "median": 45.0,
        "min": 40.0,
        "max": 50.0,
        "n": 2,
    }


def test_a_runtime_without_samples_shows_a_dash_and_no_ratio() -> None:
    row = Row("pool", "first command", "s", {"pool": [0.5]})

    assert render([row], ("cold", "pool")).splitlines()[1].split() == [
        "first",
        "command",
        "[s]",
        "-",
        "0.5",
        "(0.5-0.5)",
        "-",
    ]


def test_the_gateway_goal_is_ten_times_the_proxys_lines_rate() -> None:
    def lines(gateway: float) -> list[Row]:
        return [Row("route_lines", "lines", "MB/s", {"proxy": [1.0, 1.5], "gateway": [gateway]})]

    met, verdict = gateway_goal(lines(12.5))
    assert met and verdict.endswith("10.0x (goal >= 10x): met")
    met, verdict = gateway_goal(lines(12.0))
    assert not met and "NOT MET" in verdict


def test_each_route_leads_a_round_in_turn() -> None:
    assert [order[0] for order in _rotating(4)] == [*ROUTES, ROUTES[0]]
    assert all(sorted(order) == sorted(ROUTES) for order in _rotating(3))
