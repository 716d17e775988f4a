"""``make bench``: our backend beside common-ai's built-in one and the raw SDK, on the stack."""

from __future__ import annotations

import os

# The deployment the benchmarks' backends stamp on what they create and list by (the
# ``[opensandbox] deployment_id`` option), unless one is set: no Airflow metadata database is
# set up for them, so the id cannot be read from or made in Airflow's Variables, as the tests'
# is not either (tests/conftest.py).
DEPLOYMENT_VARIABLE = "AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID"
BENCH_DEPLOYMENT = "opensandbox-bench"


def use_a_deployment_of_its_own() -> None:
    """Gives this process, and the workers it starts, the benchmarks' deployment id."""
    os.environ.setdefault(DEPLOYMENT_VARIABLE, BENCH_DEPLOYMENT)
