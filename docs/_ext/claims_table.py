"""The claims table of verification.rst, built from the claims and the last recorded runs.

``docs/claims.toml`` says what each claim is and which tests prove it; the runs recorded in
``docs/verification/<kind>.json`` (tests/run_summary.py) say which of those tests passed, on
which commit and which images. So the table's last column is never kept by hand: a claim is
shown as passed on a kind of run only when every test it cites passed in that kind's last run.
The Docker runtime's kinds share the "Passed on" column; the Kubernetes runtime's run, of the
tests that are not about the Docker stack, has a column of its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

DOCS = Path(__file__).resolve().parent.parent
CLAIMS = DOCS / "claims.toml"
RECORDED = DOCS / "verification"
# Kinds of run on the Docker runtime, in the order the docs name them, with how a reader knows
# them: the "Passed on" column.
KINDS = {"stand-ins": "stand-ins", "named-images": "named images"}
# The run against OpenSandbox's Kubernetes runtime (docs/kubernetes.rst): a column of its own,
# since it runs only the tests that are not about the Docker stack.
KUBERNETES = "kubernetes"
ALL_KINDS = {**KINDS, KUBERNETES: "Kubernetes runtime"}
# A reference to a test: a test function's name, a test file, or a file's function.
REFERENCE = re.compile(r"``((?:tests/[\w/]+\.py(?:::\w+)*)|(?:test_\w+))``")


def references(tests_text: str) -> list[str]:
    """The tests a claim's test column cites, in order."""
    return REFERENCE.findall(tests_text)


def load_claims(path: Path = CLAIMS) -> list[dict[str, str]]:
    with path.open("rb") as claims:
        return tomllib.load(claims)["claim"]


# Test files moved after some runs were recorded: each new path with the path a run may have
# recorded it under (the file moved unchanged but for its imports).
MOVED = "moved.json"


def load_runs(directory: Path = RECORDED) -> dict[str, dict[str, Any]]:
    """The last recorded run of each kind that has one, its tests named by their current paths."""
    moved_file = directory / MOVED
    moved = json.loads(moved_file.read_text())["moved"] if moved_file.exists() else {}
    runs = {}
    for kind in ALL_KINDS:
        path = directory / f"{kind}.json"
        if path.exists():
            runs[kind] = _under_current_paths(json.loads(path.read_text()), moved)
    return runs


def _under_current_paths(run: dict[str, Any], moved: dict[str, str]) -> dict[str, Any]:
    """``run`` with each test of a moved file named by the file's current path."""
    current = {old: new for new, old in moved.items()}

    def renamed(test: str) -> str:
        path, separator, rest = test.partition("::")
        return current.get(path, path) + separator + rest

    return {
        **run,
        "tests": {renamed(test): outcome for test, outcome in run["tests"].items()},
        "needs_stack": [renamed(test) for test in run["needs_stack"]],
    }


def _matching(reference: str, tests: dict[str, str]) -> list[str]:
    if reference.startswith("tests/"):
        return [
            outcome
            for function, outcome in tests.items()
            if function == reference or function.startswith(f"{reference}::")
        ]
    return [outcome for function, outcome in tests.items() if function.endswith(f"::{reference}")]


def outcome_of(reference: str, run: dict[str, Any]) -> str:
    """``passed``, ``failed``, ``skipped`` or ``not run``: a reference's outcome in one run."""
    outcomes = _matching(reference, run["tests"])
    if not outcomes:
        return "not run"
    if any(outcome in ("failed", "error") for outcome in outcomes):
        return "failed"
    if all(outcome == "skipped" for outcome in outcomes):
        return "skipped"
    return "passed"


def needs_stack(reference: str, run: dict[str, Any]) -> bool:
    return bool(_matching(reference, dict.fromkeys(run["needs_stack"], "")))


def passed_on(cited: list[str], runs: dict[str, dict[str, Any]]) -> str:
    """The "Passed on" column of a claim's row: the Docker runtime's kinds of run."""
    runs = {kind: run for kind, run in runs.items() if kind in KINDS}
    passed = [
        kind
        for kind, run in runs.items()
        if cited and all(outcome_of(reference, run) == "passed" for reference in cited)
    ]
    skipped = [
        kind
        for kind, run in runs.items()
        if kind not in passed and any(outcome_of(r, run) == "skipped" for r in cited)
    ]
    if not passed:
        return "not passed in a recorded run"
    stack_free = not any(needs_stack(r, runs[kind]) for kind in passed for r in cited)
    if stack_free and len(passed) == len(runs):
        return "no stack needed"
    text = "both" if len(passed) == len(KINDS) else ", ".join(KINDS[kind] for kind in passed)
    if skipped:
        text += " (skipped on " + ", ".join(KINDS[kind] for kind in skipped) + ")"
    return text


def on_kubernetes(cited: list[str], runs: dict[str, dict[str, Any]]) -> str:
    """The "Kubernetes runtime" column of a claim's row: its tests' outcomes in that run."""
    docker = [run for kind, run in runs.items() if kind in KINDS]
    if cited and docker and not any(needs_stack(r, run) for run in docker for r in cited):
        return "no stack needed"
    run = runs.get(KUBERNETES)
    if run is None:
        return "no run recorded"
    outcomes = [outcome_of(reference, run) for reference in cited]
    for verdict in ("failed", "passed", "skipped", "not run"):
        if all(outcome == verdict for outcome in outcomes):
            return verdict
    if "failed" in outcomes:
        return "failed"
    counts = {o: outcomes.count(o) for o in ("passed", "skipped", "not run") if o in outcomes}
    return ", ".join(f"{count} {outcome}" for outcome, count in counts.items()) + " of its tests"


def commits_behind(commit: str, root: Path = DOCS.parent) -> int | None:
    """How many commits HEAD is past ``commit``; None when this checkout cannot tell."""
    try:
        done = subprocess.run(
            ["git", "rev-list", "--count", f"{commit}..HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return int(done.stdout.strip())


def run_sentence(kind: str, run: dict[str, Any] | None, behind: int | None) -> str:
    """One recorded run, as the page states it."""
    if run is None:
        return f"**{ALL_KINDS[kind]}**: no run of this kind is recorded yet."
    counts: dict[str, int] = {}
    for outcome in run["tests"].values():
        counts[outcome] = counts.get(outcome, 0) + 1
    tally = ", ".join(
        f"{counts[o]} {o}" for o in ("passed", "failed", "error", "skipped") if o in counts
    )
    where = (
        "a commit this checkout does not have"
        if behind is None
        else "HEAD"
        if behind == 0
        else f"{behind} commit{'s' if behind != 1 else ''} behind HEAD"
    )
    images = ", ".join(f"{role} ``{image}``" for role, image in sorted(run["images"].items()))
    # Runs recorded before the route was kept went through the server's proxy.
    route = f"; execd reached through the {run['route']}" if run.get("route") else ""
    return (
        f"**{ALL_KINDS[kind]}**: commit ``{run['commit'][:12]}`` ({where}), finished "
        f"{run['finished_at']}; images: {images or 'none'}{route}; test functions: {tally}."
    )


def table_lines(claims: list[dict[str, str]], runs: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 36 38 14 12",
        "",
        "   * - Claim",
        "     - Test",
        "     - Passed on",
        "     - Kubernetes runtime",
    ]
    for claim in claims:
        cited = references(claim["tests"])
        lines += _cell("   * - ", claim["claim"])
        lines += _cell("     - ", claim["tests"])
        lines += _cell("     - ", passed_on(cited, runs))
        lines += _cell("     - ", on_kubernetes(cited, runs))
    return lines


def _cell(lead: str, text: str) -> list[str]:
    first, *rest = text.strip().splitlines()
    return [lead + first] + ["       " + line for line in rest]


class _GeneratedDirective(SphinxDirective):
    def parsed(self, lines: list[str]) -> list[nodes.Node]:
        self.env.note_dependency(str(CLAIMS))
        for kind in ALL_KINDS:
            self.env.note_dependency(str(RECORDED / f"{kind}.json"))
        container = nodes.container()
        self.state.nested_parse(
            StringList(lines, source=str(CLAIMS)), self.content_offset, container
        )
        return container.children


class ClaimsTable(_GeneratedDirective):
    """``.. claims-table::``: every claim, its tests, and the runs it passed in."""

    def run(self) -> list[nodes.Node]:
        return self.parsed(table_lines(load_claims(), load_runs()))


class RecordedRuns(_GeneratedDirective):
    """``.. recorded-runs::``: the last run of each kind the table is built from."""

    def run(self) -> list[nodes.Node]:
        runs = load_runs()
        lines = []
        for kind in ALL_KINDS:
            run = runs.get(kind)
            behind = None if run is None else commits_behind(run["commit"])
            lines += ["* " + run_sentence(kind, run, behind), ""]
        return self.parsed(lines)


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("claims-table", ClaimsTable)
    app.add_directive("recorded-runs", RecordedRuns)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
