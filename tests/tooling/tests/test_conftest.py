"""The suite starts where pytest-xdist is not installed, as in the compatibility matrix's
environments: the suite's own plugins implement xdist's hooks only as optional ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# One quick test that needs neither the stack nor Airflow: what is proven is the start.
SELECTION = "tests/unit/test_tags.py::test_random_text_round_trips_and_stays_label_shaped"


def test_the_suite_starts_and_runs_a_test_without_pytest_xdist() -> None:
    # Without xdist's hook specifications pytest refuses, as it starts, any plugin that
    # implements one of its hooks without marking it optional.
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            SELECTION,
            "-q",
            "-p",
            "no:xdist",
            # Not this run's summary to write: the outer run writes its own.
            "-p",
            "no:run-summary",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert "INTERNALERROR" not in output, output
    assert result.returncode == 0, output
    assert "1 passed" in result.stdout, output
