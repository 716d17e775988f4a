"""How a local Airflow is laid out: what ``running_airflow`` starts, watches and stops.

The local topology is every component on this host with SQLite and the LocalExecutor; the
celery topology (:mod:`dev.airflow_stack.celery_topology`) spreads workers and triggerers over
network namespaces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from dev.airflow_stack import components
from dev.airflow_stack.home import AirflowSite
from dev.stack.state import ServerInfo


class Topology(Protocol):
    @property
    def components(self) -> tuple[str, ...]:
        """The processes whose exit means the topology is broken, as named in the home's run/."""

    def start(self, site: AirflowSite) -> None:
        """Migrate the database and start everything, in the background."""

    def stop(self, home: Path) -> None:
        """Stop whatever this topology started in ``home``, an interrupted run's leftovers too."""

    def reach(self, server: ServerInfo) -> ServerInfo:
        """``server`` as the topology's workers reach it."""


class LocalTopology:
    components = components.COMPONENTS

    def start(self, site: AirflowSite) -> None:
        components.migrate(site)
        components.start(site)

    def stop(self, home: Path) -> None:
        components.stop(home)

    def reach(self, server: ServerInfo) -> ServerInfo:
        return server


LOCAL = LocalTopology()
