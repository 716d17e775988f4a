"""The checks of one combination that use the local stack, run as one short turn of it.

The runner starts this in its own process, wrapped in the stack's lock command when it is
given one, so that each combination holds the stack only for its own two checks.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from dev.compat.checks import STACK_CHECKS
from dev.compat.combinations import REPO, Combination
from dev.compat.outcome import CheckOutcome


def run_here(combination: Combination, out: Path) -> None:
    outcomes = [check(combination).as_dict() for check in STACK_CHECKS]
    out.write_text(json.dumps(outcomes, indent=2), encoding="utf-8")


def run_in_turn(combination: Combination, lock: str | None) -> list[CheckOutcome]:
    """Run :func:`run_here` in a child process, under ``lock`` (a command prefix) if given."""
    out = combination.env / "stack-phase.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "dev.compat", "stack-phase", combination.name, str(out)]
    finished = subprocess.run(
        [*shlex.split(lock or ""), *command], cwd=REPO, capture_output=True, text=True, check=False
    )
    if not out.exists():
        why = (finished.stdout + finished.stderr).strip()[-2000:]
        return [
            CheckOutcome(check.__name__, False, 0.0, "the stack phase did not finish", why)
            for check in STACK_CHECKS
        ]
    return [CheckOutcome(**outcome) for outcome in json.loads(out.read_text(encoding="utf-8"))]
