"""The bench's table: one row per measurement, the ratios, and the speed and memory goals."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.subjects import SUBJECTS


@dataclass(frozen=True)
class Goal:
    """A target the backend is held to, checked against the row it belongs to."""

    text: str
    # True or False, None when a value is missing, or a verdict of its own in words.
    check: Callable[[Row], bool | str | None]


@dataclass
class Row:
    key: str
    title: str
    unit: str
    values: dict[str, float | None]
    notes: list[str] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)

    def ratio(self, versus: str) -> float | None:
        ours, other = self.values.get("ours"), self.values.get(versus)
        if ours is None or other is None or other == 0:
            return None
        return ours / other

    def verdicts(self) -> list[tuple[str, str]]:
        out = []
        for goal in self.goals:
            met = goal.check(self)
            if isinstance(met, str):
                out.append((goal.text, met))
            else:
                out.append((goal.text, "n/a" if met is None else "met" if met else "NOT MET"))
        return out

    def as_dict(self) -> dict:
        data = {key: value for key, value in asdict(self).items() if key != "goals"}
        data["ours/sdk"] = self.ratio("sdk")
        data["ours/built-in"] = self.ratio("built-in")
        data["goals"] = [{"goal": text, "verdict": verdict} for text, verdict in self.verdicts()]
        return data


def at_most_ratio(versus: str, limit: float) -> Goal:
    def check(row: Row) -> bool | None:
        ratio = row.ratio(versus)
        return None if ratio is None else ratio <= limit

    return Goal(f"ours/{versus} <= {limit:g}", check)


def at_least_ratio(versus: str, limit: float) -> Goal:
    def check(row: Row) -> bool | None:
        ratio = row.ratio(versus)
        return None if ratio is None else ratio >= limit

    return Goal(f"ours/{versus} >= {limit:g}", check)


def at_least_ratio_under(versus: str, limit: float, ceiling: float) -> Goal:
    """A ratio goal that this stack can only show when the source is fast enough for it."""
    plain = at_least_ratio(versus, limit)

    def check(row: Row) -> bool | str | None:
        met = plain.check(row)
        other = row.values.get(versus)
        if met is False and other is not None and ceiling < limit * other:
            return f"cannot show here: the stand-in emits {ceiling:.1f} MB/s"
        return met

    return Goal(plain.text, check)


def at_most(limit: float, unit: str) -> Goal:
    def check(row: Row) -> bool | None:
        ours = row.values.get("ours")
        return None if ours is None else ours <= limit

    return Goal(f"ours <= {limit:g} {unit}", check)


def at_least(limit: float, unit: str) -> Goal:
    def check(row: Row) -> bool | None:
        ours = row.values.get("ours")
        return None if ours is None else ours >= limit

    return Goal(f"ours >= {limit:g} {unit}", check)


def equals(target: float, unit: str) -> Goal:
    def check(row: Row) -> bool | None:
        ours = row.values.get("ours")
        return None if ours is None else ours == target

    return Goal(f"ours = {target:g} {unit}", check)


def _cell(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"


def render(rows: list[Row]) -> str:
    header = ["row", "measure", *SUBJECTS, "ours/sdk", "ours/built-in", "goal", "verdict"]
    lines = [header]
    for row in rows:
        verdicts = row.verdicts() or [("", "")]
        for index, (goal, verdict) in enumerate(verdicts):
            if index == 0:
                cells = [
                    row.key,
                    f"{row.title} ({row.unit})",
                    *(_cell(row.values.get(subject)) for subject in SUBJECTS),
                    _cell(row.ratio("sdk")),
                    _cell(row.ratio("built-in")),
                ]
            else:
                cells = [""] * (len(header) - 2)
            lines.append([*cells, goal, verdict])
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    text.insert(1, "  ".join("-" * width for width in widths))
    notes = [f"  [{row.key}] {note}" for row in rows for note in row.notes]
    if notes:
        text += ["", "Notes:", *notes]
    return "\n".join(text)


def shortfalls(rows: list[Row]) -> list[str]:
    """
    What keeps the run from passing, one line each: every goal NOT MET, and every row with no
    result for ours. Empty when the run passed. A goal that cannot be judged because another
    subject has no result ("n/a"), or that says it cannot be shown on this stack, is not one:
    it is about the others, or about the stack, not about ours.
    """
    lines = []
    for row in rows:
        label = f"[{row.key}] {row.title}"
        if row.values.get("ours") is None:
            lines.append(f"{label}: no result for ours")
        lines += [
            f"{label}: {goal} NOT MET" for goal, verdict in row.verdicts() if verdict == "NOT MET"
        ]
    return lines


def exit_status(rows: list[Row]) -> int:
    """
    ``make bench``'s exit status: 0 when :func:`shortfalls` finds none, else 1, with each one
    printed, so that a run that missed a goal fails where it is run and says which rows.
    """
    missed = shortfalls(rows)
    if not missed:
        print("bench: every goal met.")
        return 0
    print(f"bench: FAILED, {len(missed)} shortfall(s):", file=sys.stderr)
    for line in missed:
        print(f"  {line}", file=sys.stderr)
    return 1


def write_json(path: Path, rows: list[Row], context: dict, raw: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"context": context, "rows": [row.as_dict() for row in rows], "raw": raw}
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
