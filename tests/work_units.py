"""How `make test` shares the suite among pytest-xdist's workers: in units that may run side by
side without touching each other.

A unit runs on one worker, its tests in order. Most units are one test file: its tests create
sandboxes of their own and wait on them, so files run side by side as two users of one server
would. Three units are handed out first, the longest first, so that none of them is left to
run alone at the end:

- "airflow", tests/airflow_path: its files share one migrated Airflow home, its api-server
  port and its Dag folder, so they run one after another; beside the files, it is one more
  user of the stack.
- "topology", tests/topology: its files share one celery topology in one Airflow home.
- "executor", tests/airflow_path/test_executor.py: its Airflow has a home, a Dag folder and a
  span of api-server ports of its own, so it leaves the airflow unit, whose longest file it
  was (its 50 mapped tries take minutes), and runs beside it.

Nothing runs alone. What the folders that stand on the host do reaches no other test:

- The OpenSandbox servers that tests start and restart (tests/own_server.py) see the Docker
  engine through a view that lists only the containers they made (tests/engine_view.py). A
  server that starts otherwise removes every egress sidecar it sees without its sandbox
  container, which is what another server's create looks like between its two containers,
  and ends every sandbox past the expiry its labels give, which renewals through another
  server do not change: beside the rest, both failed other tests' sandboxes before the view.
- tests/reliability's network namespaces and nftables tables, and tests/topology's bridge,
  namespaces and table, have names of their own and rules only for their own links; the
  containers they freeze or kill are their own sandboxes'.
- The topology's leftover checks count only their own Airflow run's sandboxes
  (tests/topology/leftovers.py); the run-wide leak check runs in the controller
  (tests/leak_check.py), which sees every worker's sandboxes.

Without xdist (``-n 0``) the suite runs in one process and nothing here applies.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# The named units, in the order they are handed out: the folders or files (as node ids
# begin) each is made of. A test is in the unit of the longest beginning it has, so a file can
# be a unit of its own within a folder's.
NAMED_UNITS = {
    "airflow": ("tests/airflow_path/",),
    "topology": ("tests/topology/",),
    "executor": ("tests/airflow_path/test_executor.py",),
}
_BY_LONGEST_BEGINNING = sorted(
    ((beginning, name) for name, beginnings in NAMED_UNITS.items() for beginning in beginnings),
    key=lambda pair: -len(pair[0]),
)


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to: a named unit's name, or its own file."""
    for beginning, name in _BY_LONGEST_BEGINNING:
        if nodeid.startswith(beginning):
            return name
    return nodeid.split("::", 1)[0]


def in_unit_order(items: list[pytest.Item]) -> None:
    """Sorts ``items`` so the units come in the order they are handed out: the named units
    first, in NAMED_UNITS's order, then the files as collected. Stable, so each unit keeps
    its own order."""
    names = list(NAMED_UNITS)

    def rank(item: pytest.Item) -> int:
        unit = unit_of(item.nodeid)
        return names.index(unit) if unit in NAMED_UNITS else len(names)

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
