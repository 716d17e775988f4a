"""The ``airflow`` subcommands this provider adds: none.

Declared all the same because the provider ships an executor: Airflow 3.2 and later otherwise
import it at each ``airflow`` command to ask for commands, and warn on stdout, which breaks
``airflow ... -o json``.
"""

from __future__ import annotations

from typing import Any


def get_cli_commands() -> list[Any]:
    return []
