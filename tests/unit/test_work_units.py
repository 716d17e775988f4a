"""How `make test` shares the suite among xdist's workers (tests/work_units.py), driven the way
xdist's controller drives a scheduler, with stand-ins for its workers."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

# make test's environment has xdist; the compatibility matrix's environments do not.
pytest.importorskip("xdist", reason="pytest-xdist is not installed in this environment")

from tests.work_units import UnitScheduling, in_unit_order, unit_of  # noqa: E402

COLLECTED = [
    "tests/airflow_path/test_a.py::test_1",
    "tests/airflow_path/test_b.py::test_1",
    "tests/integration/test_x.py::test_1",
    "tests/integration/test_x.py::test_2",
    "tests/integration/test_y.py::test_1",
    "tests/unit/test_z.py::test_1",
    "tests/network/test_n.py::test_1",
    "tests/topology/test_t.py::test_1",
]


class Worker:
    """What the scheduler uses of xdist's WorkerController: the tests it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler_with(workers: list[Worker]) -> UnitScheduling:
    option = SimpleNamespace(loadscopereorder=True)
    config = SimpleNamespace(option=option, getvalue=lambda name: [f"{len(workers)}*popen"])
    scheduler = UnitScheduling(config)
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, COLLECTED)
    scheduler.schedule()
    return scheduler


def run_to_the_end(scheduler: UnitScheduling, workers: list[Worker], seed: int) -> list[tuple]:
    """Runs every worker's tests as xdist's workers do, the workers taking turns in an order
    drawn from ``seed``: a worker runs a test only once it holds the next one too, or has
    been told to stop. What happened, in order: ("sent", worker, node id) and ("ran", ...)."""
    turns = random.Random(seed)
    done: dict[str, int] = {w.name: 0 for w in workers}
    events: list[tuple] = [("sent", w.name, COLLECTED[i]) for w in workers for i in w.sent]
    while True:
        ready = [w for w in workers if len(w.sent) - done[w.name] >= (1 if w.shutting_down else 2)]
        if not ready:
            return events
        worker = turns.choice(ready)
        index = worker.sent[done[worker.name]]
        done[worker.name] += 1
        before = {w.name: len(w.sent) for w in workers}
        events.append(("ran", worker.name, COLLECTED[index]))
        scheduler.mark_test_complete(worker, index)
        for w in workers:
            events += [("sent", w.name, COLLECTED[i]) for i in w.sent[before[w.name] :]]


def test_the_folders_that_share_something_are_one_unit_each_and_other_tests_their_file() -> None:
    assert {unit_of(n) for n in COLLECTED} == {
        "airflow",
        "host",
        "tests/integration/test_x.py",
        "tests/integration/test_y.py",
        "tests/unit/test_z.py",
    }


def test_units_are_ordered_longest_shared_first_and_those_that_run_alone_last() -> None:
    items = [SimpleNamespace(nodeid=n) for n in reversed(COLLECTED)]
    in_unit_order(items)
    units = [unit_of(item.nodeid) for item in items]
    assert units[:2] == ["airflow", "airflow"]
    assert units[-2:] == ["host", "host"]
    assert set(units[2:-2]) == {
        "tests/unit/test_z.py",
        "tests/integration/test_y.py",
        "tests/integration/test_x.py",
    }


@pytest.mark.parametrize("seed", range(20))
def test_every_test_runs_once_and_the_host_unit_alone_on_the_last_worker(seed: int) -> None:
    workers = [Worker("a"), Worker("b"), Worker("c")]
    scheduler = scheduler_with(workers)
    events = run_to_the_end(scheduler, workers, seed)

    ran = [node for kind, _, node in events if kind == "ran"]
    assert sorted(ran) == sorted(COLLECTED)
    assert scheduler.tests_finished
    host = [(i, who) for i, (kind, who, node) in enumerate(events) if unit_of(node) == "host"]
    assert len({who for _, who in host}) == 1
    first_host_sent = min(i for i, _ in host)
    runner = host[0][1]
    others = [w for w in workers if w.name != runner]
    # Once the host unit is sent, the other workers are stopping and get nothing more, and
    # each runs at most the one test it still held.
    assert all(w.shutting_down for w in others)
    later = events[first_host_sent:]
    assert not [e for e in later if e[0] == "sent" and e[1] != runner]
    for w in others:
        assert len([e for e in later if e[0] == "ran" and e[1] == w.name]) <= 1


def test_a_run_of_the_host_unit_alone_goes_to_one_worker() -> None:
    workers = [Worker("a"), Worker("b")]
    option = SimpleNamespace(loadscopereorder=True)
    config = SimpleNamespace(option=option, getvalue=lambda name: ["2*popen"])
    scheduler = UnitScheduling(config)
    host_only = [n for n in COLLECTED if unit_of(n) == "host"]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, host_only)
    scheduler.schedule()
    sent = {w.name: [host_only[i] for i in w.sent] for w in workers}
    assert sorted(map(len, sent.values())) == [0, 2]
