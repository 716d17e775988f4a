"""What one check of one combination came to, and pytest's closing line read into counts."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

# pytest's last line, such as "3 failed, 527 passed, 2 skipped in 131.85s (0:02:11)".
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")


@dataclass(frozen=True)
class CheckOutcome:
    check: str
    passed: bool
    seconds: float
    summary: str
    # The end of the output, kept so a failure can be read from the artifact alone.
    tail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's closing line; empty when there is none (it did not finish)."""
    lines = [line for line in output.strip().splitlines() if _COUNT.search(line)]
    if not lines:
        return {}
    counts: dict[str, int] = {}
    for number, kind in _COUNT.findall(lines[-1]):
        counts["errors" if kind.startswith("error") else kind] = int(number)
    return counts


def describe_counts(counts: dict[str, int]) -> str:
    if not counts:
        return "no pytest summary"
    return ", ".join(f"{number} {kind}" for kind, number in counts.items())


def tail(output: str, lines: int = 40) -> str:
    return "\n".join(output.strip().splitlines()[-lines:])
