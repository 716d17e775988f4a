"""How `make test` shares the suite among xdist's workers (tests/work_units.py), driven the way
xdist's controller drives a scheduler, with stand-ins for its workers."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

# make test's environment has xdist; the compatibility matrix's environments do not.
pytest.importorskip("xdist", reason="pytest-xdist is not installed in this environment")

from tests.work_units import UnitScheduling, in_unit_order, unit_of  # noqa: E402

# As the workers collect them, in_unit_order having sorted them.
COLLECTED = [
    "tests/airflow_path/test_a.py::test_1",
    "tests/airflow_path/test_b.py::test_1",
    "tests/topology/test_t.py::test_1",
    "tests/topology/test_u.py::test_1",
    "tests/airflow_path/test_executor.py::test_1",
    "tests/airflow_path/test_executor.py::test_2",
    "tests/integration/test_lease.py::test_1",
    "tests/integration/test_x.py::test_1",
    "tests/integration/test_x.py::test_2",
    "tests/network/test_n.py::test_1",
    "tests/reliability/test_server_faults.py::test_1",
    "tests/unit/test_z.py::test_1",
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
        "topology",
        "executor",
        "tests/integration/test_lease.py",
        "tests/integration/test_x.py",
        "tests/network/test_n.py",
        "tests/reliability/test_server_faults.py",
        "tests/unit/test_z.py",
    }


def test_a_file_named_a_unit_is_its_own_not_its_folders() -> None:
    assert unit_of("tests/airflow_path/test_executor.py::test_1") == "executor"
    assert unit_of("tests/airflow_path/test_executor_other.py::test_1") == "airflow"


def test_the_named_units_come_first_in_their_order_each_keeping_its_own() -> None:
    items = [SimpleNamespace(nodeid=n) for n in reversed(COLLECTED)]
    in_unit_order(items)
    ids = [item.nodeid for item in items]
    assert ids[:6] == [
        "tests/airflow_path/test_b.py::test_1",
        "tests/airflow_path/test_a.py::test_1",
        "tests/topology/test_u.py::test_1",
        "tests/topology/test_t.py::test_1",
        "tests/airflow_path/test_executor.py::test_2",
        "tests/airflow_path/test_executor.py::test_1",
    ]
    assert ids[6:] == list(reversed(COLLECTED[6:]))


@pytest.mark.parametrize("seed", range(20))
def test_every_test_runs_once_each_unit_on_one_worker_in_its_order(seed: int) -> None:
    workers = [Worker("a"), Worker("b"), Worker("c")]
    scheduler = scheduler_with(workers)
    events = run_to_the_end(scheduler, workers, seed)

    ran = [(who, node) for kind, who, node in events if kind == "ran"]
    assert sorted(node for _, node in ran) == sorted(COLLECTED)
    assert scheduler.tests_finished
    for unit in set(map(unit_of, COLLECTED)):
        mine = [(who, node) for who, node in ran if unit_of(node) == unit]
        assert len({who for who, _ in mine}) == 1, mine
        assert [node for _, node in mine] == [n for n in COLLECTED if unit_of(n) == unit]


def test_the_named_units_go_first_to_three_workers_beside_each_other() -> None:
    workers = [Worker("a"), Worker("b"), Worker("c")]
    scheduler_with(workers)
    first = [unit_of(COLLECTED[w.sent[0]]) for w in workers]
    assert first == ["airflow", "topology", "executor"]
