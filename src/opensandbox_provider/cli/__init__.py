"""The ``airflow`` subcommands this provider adds: none.

The provider declares this function in ``get_provider_info``'s ``cli`` list because it ships an
executor: Airflow 3.2 and later otherwise import every executor of a provider without a ``cli``
entry at each ``airflow`` command, to ask it for commands, and print a warning on stdout that
breaks ``airflow ... -o json``. An empty list says there is nothing to ask.
"""

from __future__ import annotations

from typing import Any


def get_cli_commands() -> list[Any]:
    return []
