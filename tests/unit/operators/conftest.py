"""Fixtures the operator's unit tests share."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def default_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """
    ``opensandbox_default`` on a port nothing answers: the operator reads its connection before
    it creates (for on_kill), and these tests send nothing to it.
    """
    # A key no test output holds: Airflow 2.11 masks every password it loads, at any length,
    # for the rest of the process, so a key of "k" turned a later test's "ok" into "o***".
    connection = {
        "conn_type": "opensandbox",
        "host": "127.0.0.1",
        "port": 9,
        "password": "operator-test-key",
    }
    monkeypatch.setenv("AIRFLOW_CONN_OPENSANDBOX_DEFAULT", json.dumps(connection))
