"""The matrix as a table on the terminal and as ``artifacts/compat.json``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dev.compat.combinations import COMBINATIONS, REPO, Combination
from dev.compat.outcome import CheckOutcome

ARTIFACT = REPO / "artifacts" / "compat.json"
VERSIONS_SHOWN = (
    "apache-airflow",
    "apache-airflow-providers-common-ai",
    "apache-airflow-providers-common-compat",
    "opensandbox",
)


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


def _commit() -> str:
    """The commit the run ran, marked when the tree had changes: a table is only as true as
    the tree it came from."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return f"{commit} (with uncommitted changes)" if git("status", "--porcelain") else commit


def _rows_of(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of an artifact, each with the date and commit of the run that made it (an
    artifact of one run has them once, at its top)."""
    return [
        {"date": document.get("date", "?"), "commit": document.get("commit", "?"), **row}
        for row in document["combinations"]
    ]


def write_artifact(
    results: Mapping[Combination, Sequence[CheckOutcome]],
    path: Path = ARTIFACT,
    *,
    keep_others: bool = False,
) -> Path:
    """
    The run's outcomes as the artifact; with ``keep_others``, the rows of combinations this run
    did not run stay as an earlier run left them, each with its own date and commit, so that a
    combination run again after a fix replaces only its own row.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    date, commit = datetime.now(UTC).strftime("%Y-%m-%d"), _commit()
    rows = {
        combination.name: {
            "combination": combination.name,
            "date": date,
            "commit": commit,
            "python": combination.python,
            "gating": combination.gating,
            "versions": _pins_of(combination, VERSIONS_SHOWN),
            "passed": all(outcome.passed for outcome in outcomes),
            "checks": [outcome.as_dict() for outcome in outcomes],
        }
        for combination, outcomes in results.items()
    }
    if keep_others and path.exists():
        earlier = {row["combination"]: row for row in _rows_of(json.loads(path.read_text()))}
        rows = earlier | rows
    order = [combination.name for combination in COMBINATIONS]
    ordered = sorted(rows.values(), key=lambda row: order.index(row["combination"]))
    path.write_text(json.dumps({"combinations": ordered}, indent=2) + "\n", encoding="utf-8")
    return path


def gating_passed(results: Mapping[Combination, Sequence[CheckOutcome]]) -> bool:
    """Whether every check of every gating combination passed; the early-warning lane's
    outcome is recorded, never gating."""
    return all(o.passed for c, outcomes in results.items() if c.gating for o in outcomes)


DOC = REPO / "docs" / "compatibility.rst"
_START = ".. The table below is written by `python -m dev.compat doc` from artifacts/compat.json.\n"
_END = ".. End of the written table.\n"


def _cell(check: Mapping[str, object] | None) -> str:
    if check is None:
        return "not run"
    mark = "pass" if check["passed"] else "FAIL"
    summary = f" ({check['summary']})" if check["check"] == "unit" or not check["passed"] else ""
    return f"{mark}, {float(str(check['seconds'])):.0f} s{summary}"


def rst_table(document: Mapping[str, Any]) -> str:
    """The last run of each combination as the RST table docs/compatibility.rst shows, with the
    date and commit each ran at."""
    rows = _rows_of(document)
    checks = ["unit", "connection_type", "agent", "attach_dag"]
    gating = [row for row in rows if row["gating"]]
    verdict = (
        "every check of every gating combination passed"
        if all(row["passed"] for row in gating)
        else "some checks FAILED (see the table)"
    )
    runs = sorted({f"{row['date']}, commit ``{row['commit']}``" for row in rows})
    lines = [
        f"Last run of each combination ({'; '.join(runs)}): {verdict}.",
        "Seconds per check, on a two-core machine shared with other work; the counts are "
        "pytest's. The early-warning lane is recorded and does not gate.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - Combination",
        "     - Versions (Airflow, common-ai, common-compat, SDK); run",
        *(f"     - ``{check}``" for check in checks),
    ]
    for row in rows:
        by_check = {check["check"]: check for check in row["checks"]}
        versions = ", ".join(row["versions"].values())
        name = row["combination"] + ("" if row["gating"] else " (early warning)")
        if not by_check.get("environment", {"passed": True})["passed"]:
            versions += "; environment FAILED"
        lines += [
            f"   * - {name}",
            f"     - {versions}, Python {row['python']}; {row['date']}, ``{row['commit']}``",
        ]
        lines += [f"     - {_cell(by_check.get(check))}" for check in checks]
    return "\n".join(lines) + "\n"


def write_doc(artifact: Path = ARTIFACT, doc: Path = DOC) -> Path:
    """Replace the table in docs/compatibility.rst with the one of the last run."""
    document = json.loads(artifact.read_text(encoding="utf-8"))
    text = doc.read_text(encoding="utf-8")
    before, rest = text.split(_START, 1)
    _, after = rest.split(_END, 1)
    doc.write_text(f"{before}{_START}\n{rst_table(document)}\n{_END}{after}", encoding="utf-8")
    return doc
