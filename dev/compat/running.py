"""Commands run inside a combination's environment, with an Airflow home of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from dev.compat.combinations import REPO, Combination

# Settings inherited from the caller would change what each Airflow does; pytest's variables
# would switch Airflow into its own unit-test behaviour.
_INHERITED_PREFIXES = ("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_", "PYTEST_", "_AIRFLOW")


@dataclass(frozen=True)
class Finished:
    returncode: int
    output: str
    seconds: float
    # Apart as well, for a program whose result is on stdout and whose warnings are not.
    stdout: str = ""


def fresh_home(combination: Combination, purpose: str) -> Path:
    """An empty Airflow home for one check: the Airflow lines' databases do not mix."""
    home = combination.env / "homes" / purpose
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home


def environment(home: Path) -> dict[str, str]:
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_INHERITED_PREFIXES) and key not in ("AIRFLOW_HOME", "VIRTUAL_ENV")
    }
    return inherited | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Our tree, not whatever the caller's PYTHONPATH names; the package itself is installed.
        "PYTHONPATH": str(REPO),
        "VIRTUAL_ENV": "",
    }


def run(command: list[str], home: Path, *, timeout: float) -> Finished:
    started = time.monotonic()
    try:
        result = subprocess.run(
            command,
            cwd=REPO,
            env=environment(home),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        # The partial output comes as bytes even when text was asked for.
        output = "".join(
            part.decode(errors="replace") if isinstance(part, bytes) else part
            for part in (expired.stdout or "", expired.stderr or "")
        )
        return Finished(
            -1, f"{output}\nTimed out after {timeout:.0f}s.", time.monotonic() - started
        )
    output = result.stdout + result.stderr
    return Finished(result.returncode, output, time.monotonic() - started, result.stdout)
