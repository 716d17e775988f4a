"""How `make test` shares the suite among pytest-xdist's workers: in units that may run side by
side without touching each other.

A unit runs on one worker, its tests in order. Most units are one test file: its tests create
sandboxes of their own and wait on them, so files run side by side as two users of one server
would. Two units are named, and handed out first, the longest first:

- "airflow", tests/airflow_path: its files share one migrated Airflow home, its api-server
  port and its Dag folder, so they run one after another; beside the files, it is one more
  user of the stack.
- "own-servers", the tests that start OpenSandbox servers of their own and the test whose
  sandboxes they would end: tests/integration/test_lease.py, then
  tests/reliability/test_server_faults.py, then tests/topology (one celery topology in one
  Airflow home, shared by its files). A server that starts or restarts arms an expiry timer
  for every sandbox on the Docker engine, whichever server made it, at the expiry it reads
  from the sandbox's labels: the one its creator asked for, since renewals through another
  server are kept in that server's own HOME. It ends a sandbox still there at that time. Only
  a sandbox that outlives the lease it was created with is still there, and in this suite
  only test_lease.py's do: in one unit with the servers, they never exist while one starts.
  Every other sandbox lives on its creator's lease (an hour by default) and is destroyed well
  within it.

Nothing else the folders that stand on the host do reaches another test: tests/reliability's
network namespaces and nftables tables, and tests/topology's bridge, namespaces and table, have
names of their own and rules only for their own links; the containers they kill are their own
sandboxes'; the topology's leftover checks count only their own Airflow run's sandboxes
(tests/topology/leftovers.py); the run-wide leak check runs in the controller
(tests/leak_check.py).

Without xdist (``-n 0``) the suite runs in one process and nothing here applies.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# The units that are more than one file, by name, in the order they are handed out: what each
# is made of (as node ids begin), in the order its tests run.
NAMED_UNITS = {
    "airflow": ("tests/airflow_path/",),
    "own-servers": (
        "tests/integration/test_lease.py",
        "tests/reliability/test_server_faults.py",
        "tests/topology/",
    ),
}


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to: a named unit's name, or its own file."""
    for name, parts in NAMED_UNITS.items():
        if nodeid.startswith(parts):
            return name
    return nodeid.split("::", 1)[0]


def in_unit_order(items: list[pytest.Item]) -> None:
    """Sorts ``items`` so the units come in the order they are handed out: the named units
    first, in NAMED_UNITS's order, then the files as collected. Within a named unit, its parts
    in NAMED_UNITS's order; stable, so each part keeps its own order."""
    names = list(NAMED_UNITS)

    def rank(item: pytest.Item) -> tuple[int, int]:
        unit = unit_of(item.nodeid)
        if unit not in NAMED_UNITS:
            return (len(names), 0)
        part = next(i for i, p in enumerate(NAMED_UNITS[unit]) if item.nodeid.startswith(p))
        return (names.index(unit), part)

    items.sort(key=rank)


class UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling, with our units as its scopes in the order collected."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        # xdist would otherwise hand out the units with the most tests first: unit tests.
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling:
    return UnitScheduling(config, log)
