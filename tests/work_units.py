"""How `make test` shares the suite among pytest-xdist's workers: in units that may run side by
side without touching each other.

A unit runs on one worker, its tests in order. Most units are one test file: its tests create
sandboxes of their own and wait on them, so files run side by side as two users of one server
would. Two units are whole folders:

- "airflow", tests/airflow_path: its files share one migrated Airflow home, its api-server
  port and its Dag folder, so they run one after another; beside the files, it is one more
  user of the stack. It is handed out first, being the longest.
- "host", tests/stack, tests/reliability, tests/network and tests/topology, which change what
  every other test stands on: they start and stop OpenSandbox servers of their own (a server
  that starts takes over the expiry of every sandbox on the Docker engine, whichever server
  made it, and removes every egress sidecar whose sandbox container it does not see, which
  is what another server's create looks like between its two containers: a fresh-clone run
  with this unit beside the others failed a create so), freeze containers, make network
  namespaces with nftables rules of their own on the host, and count every OpenSandbox
  container on the engine. It runs last and alone: every worker but one stops as it runs
  out of files, and the last one left runs it once it has run its own, beside what the
  others still held (at most one test each, which tests/network, the unit's first folder,
  stands). Its folders run in the order collected.

Without xdist (``-n 0``) the suite runs in one process and nothing here applies.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# The units that are whole folders, by name: the folders (as node ids begin) each is made of.
FOLDER_UNITS = {
    "airflow": ("tests/airflow_path/",),
    "host": ("tests/stack/", "tests/reliability/", "tests/network/", "tests/topology/"),
}
# The units that run with nothing beside them.
ALONE = {"host"}


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to: a folder unit's name, or its own file."""
    for name, folders in FOLDER_UNITS.items():
        if nodeid.startswith(folders):
            return name
    return nodeid.split("::", 1)[0]


def in_unit_order(items: list[pytest.Item]) -> None:
    """Sorts ``items`` so the units come in the order they are handed out: the longest shared
    unit first, the files as collected, the units that run alone last. Stable, so each unit
    keeps its own order."""

    def rank(item: pytest.Item) -> int:
        unit = unit_of(item.nodeid)
        if unit in ALONE:
            return 2
        return 0 if unit in FOLDER_UNITS else 1

    items.sort(key=rank)


class UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling, with our units as its scopes in the order collected, and
    the units of ALONE left to the last worker."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        # xdist would otherwise hand out the units with the most tests first: unit tests.
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
        if next(iter(self.workqueue)) in ALONE:
            if any(o is not node and not o.shutting_down for o in self.assigned_work):
                # A worker runs a test only once it knows the next one or that it stops, so a
                # worker down to its last test cannot be kept waiting for the others: it stops
                # once it has run it, and the last worker left runs the unit.
                if self._pending_of(self.assigned_work[node]) <= 1:
                    node.shutdown()
                return
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling:
    return UnitScheduling(config, log)
