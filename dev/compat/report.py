"""The matrix as a table on the terminal and as ``artifacts/compat.json``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from dev.compat.combinations import REPO, Combination
from dev.compat.outcome import CheckOutcome

ARTIFACT = REPO / "artifacts" / "compat.json"


def _pins_of(combination: Combination, names: Sequence[str]) -> dict[str, str]:
    pins = dict(
        line.split("==", 1)
        for line in combination.pins.read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith("#")
    )
    return {name: pins.get(name, "?") for name in names}


def table(results: Mapping[Combination, Sequence[CheckOutcome]]) -> str:
    checks = [o.check for o in max(results.values(), key=len)]
    rows = [["combination", *checks, "total s"]]
    for combination, outcomes in results.items():
        by_check = {o.check: o for o in outcomes}
        # A check that never ran (its environment did not build) shows as a dash.
        cells = [
            f"{'pass' if o.passed else 'FAIL'} {o.seconds:.0f}s" if (o := by_check.get(c)) else "-"
            for c in checks
        ]
        rows.append([combination.name, *cells, f"{sum(o.seconds for o in outcomes):.0f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def write_artifact(
    results: Mapping[Combination, Sequence[CheckOutcome]], path: Path = ARTIFACT
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = [
        {
            "combination": combination.name,
            "versions": _pins_of(
                combination,
                ["apache-airflow", "apache-airflow-providers-common-ai", "opensandbox"],
            ),
            "passed": all(outcome.passed for outcome in outcomes),
            "checks": [outcome.as_dict() for outcome in outcomes],
        }
        for combination, outcomes in results.items()
    ]
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path
