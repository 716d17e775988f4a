"""What a run of the suite showed, kept so that docs/verification.rst is built from it.

Every run writes ``artifacts/run-summary.json``: the commit it ran on, the images the stack
served (our stand-ins, or images named at ``up``), and each test function's outcome. After a
whole-suite run, ``python -m tests.run_summary record`` (``make verification-record``) copies
it to ``docs/verification/<kind>.json``, one file per kind of run, which the claims table of
docs/verification.rst reads (``docs/_ext/claims_table.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_SUMMARY = ROOT / "artifacts" / "run-summary.json"
RECORDED = ROOT / "docs" / "verification"
# The kinds of run the docs report: CI's, on our stand-ins, the one by hand on the images named
# with EXECD_IMAGE and EGRESS_IMAGE (the real execd and egress sidecar), and the one by hand
# against OpenSandbox's Kubernetes runtime (RUNTIME=kubernetes, docs/kubernetes.rst).
STAND_INS = "stand-ins"
NAMED_IMAGES = "named-images"
KUBERNETES = "kubernetes"
# A function's outcome over its parameters: the worst of them, so one failing case is seen.
OUTCOME_ORDER = ("failed", "error", "skipped", "passed")


def function_id(nodeid: str) -> str:
    """``tests/x.py::test_y[a]`` -> ``tests/x.py::test_y``: claims cite functions."""
    return nodeid.split("[", 1)[0]


# eq=False keeps it hashable, as pytest needs a plugin to be.
@dataclass(eq=False)
class RunSummary:
    """Collects outcomes as pytest reports them; written once the session ends."""

    selected_everything: bool
    path: Path = RUN_SUMMARY
    outcomes: dict[str, str] = field(default_factory=dict)
    needs_stack: set[str] = field(default_factory=set)
    collected: int = 0

    @classmethod
    def for_config(cls, config: pytest.Config) -> RunSummary:
        # -x is maxfail=1; --lf and --sw come from plugins that may be disabled.
        narrowing = ("keyword", "markexpr", "deselect", "maxfail", "lf", "stepwise")
        narrowed = any(getattr(config.option, name, None) for name in narrowing) or any(
            arg.rstrip("/") != "tests" for arg in config.args
        )
        return cls(selected_everything=not narrowed)

    # Last, after conftest.py has marked the tests that need the stack.
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.collected = len(items)
        self.needs_stack = {
            function_id(item.nodeid) for item in items if item.get_closest_marker("stack")
        }

    # With pytest-xdist the workers collect, and the controller, which writes the summary,
    # learns the count from each of them (all collect the same tests) and the stack mark
    # from the reports.
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self.collected = len(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        function = function_id(report.nodeid)
        if "stack" in report.keywords:
            self.needs_stack.add(function)
        if report.when == "call":
            self._note(function, report.outcome)
        elif report.skipped:
            self._note(function, "skipped")
        elif report.failed:
            # A failure outside the test's body (a fixture, a teardown) is an error, as
            # pytest says.
            self._note(function, "error")

    def _note(self, function: str, outcome: str) -> None:
        before = self.outcomes.get(function)
        if before is None or OUTCOME_ORDER.index(outcome) < OUTCOME_ORDER.index(before):
            self.outcomes[function] = outcome

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.as_json(exitstatus), indent=1, sort_keys=True))

    def as_json(self, exitstatus: int) -> dict[str, Any]:
        images = _stack_images()
        return {
            "kind": _kind(images),
            "commit": _git("rev-parse", "HEAD"),
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "finished_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "images": images.get("images", {}),
            "route": images.get("route", ""),
            "complete": self.selected_everything and len(self.outcomes) > 0,
            "exit_status": int(exitstatus),
            "collected": self.collected,
            "needs_stack": sorted(self.needs_stack),
            "tests": dict(sorted(self.outcomes.items())),
        }


def _kind(images: dict[str, Any]) -> str:
    from dev.stack.state import runtime

    if runtime() == "kubernetes":
        return KUBERNETES
    return NAMED_IMAGES if images.get("named") else STAND_INS


def _stack_images() -> dict[str, Any]:
    from dev.stack.state import read_state

    try:
        state = read_state()
    except RuntimeError:
        return {}
    named = [role for role in state.images if state.runs_named(role)]
    return {"images": dict(state.images), "named": named, "route": _route(state)}


def _route(state: Any) -> str:
    """How the suite's calls reached execd: on Kubernetes, through the server's proxy or, where
    the connections leave it off (``KUBE_ROUTE=gateway``), through the ingress gateway."""
    from dev.stack.state import runtime

    if runtime() != "kubernetes":
        return ""
    gateway = any(
        info.connection_extra.get("use_server_proxy") == "false" for info in state.servers.values()
    )
    return "ingress gateway" if gateway else "server proxy"


def _git(*arguments: str) -> str:
    try:
        done = subprocess.run(
            ["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return done.stdout.strip()


def record(summary_file: Path = RUN_SUMMARY, into: Path = RECORDED) -> Path:
    """Keeps a whole-suite run's summary as the last of its kind; refuses any other run."""
    summary = json.loads(summary_file.read_text())
    if not summary["complete"]:
        raise SystemExit(
            f"{summary_file} is from a run of part of the suite (a path, -k, -m, -x or "
            "--deselect narrowed it); only a whole-suite run is recorded. Run `make test`."
        )
    if summary["dirty"]:
        raise SystemExit(
            f"{summary_file} is from a run on uncommitted changes; commit them and run again, "
            "so that the docs can name the commit the run proves."
        )
    into.mkdir(parents=True, exist_ok=True)
    target = into / f"{summary['kind']}.json"
    shutil.copyfile(summary_file, target)
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        raise SystemExit("usage: python -m tests.run_summary record")
    print(f"Recorded {record().relative_to(ROOT)}.")
