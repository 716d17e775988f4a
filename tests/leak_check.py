"""The run-wide leak check: fails the run if a container, volume, network or snapshot
OpenSandbox made during it outlives it, or a warm pool a test made still holds an idle sandbox.

It runs in the process that sees the whole run: pytest itself, or with pytest-xdist the
controller, whose session starts before any worker's and ends after every worker's. A worker
drains its own warm pools as its session ends and hands the counts to the controller.

It compares with what existed at the start, so another run on the same engine at the same time
can make it fail too: run the stack suites one at a time.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from dev.stack import leaks
from dev.stack.state import StackState, read_state, runtime
from tests import warm_pools
from tests.snapshot_leaks import snapshot_leftovers, snapshot_resources

# The key of a worker's warm-pool counts in what it hands the controller.
IDLE_KEY = "opensandbox_idle_warm_pools"


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class WarmPoolDrain:
    """In an xdist worker: drains the pools its tests made, for the controller to report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_sessionfinish(self) -> None:
        workeroutput: dict[str, Any] = self.config.workeroutput  # type: ignore[attr-defined]
        workeroutput[IDLE_KEY] = dict(warm_pools.drain_all())


class LeakCheck:
    """In the process that sees the whole run: what exists at its start, compared at its end."""

    def __init__(self) -> None:
        self.stack_tests_ran = False
        self.idle: dict[str, int] = {}
        self.kubernetes = False
        self.before: set[Any] | None = None
        self.state: StackState | None = None
        self.snapshots_before: set[Any] = set()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        try:
            self.state = read_state()
        except RuntimeError:
            return  # no stack: the stack fixture fails the tests with its own message
        self.kubernetes = runtime() == "kubernetes"
        if self.kubernetes:
            from dev.kube import opensandbox

            self.before = set(opensandbox.batchsandboxes())
            return
        try:
            self.before = leaks.opensandbox_resources()
        except (OSError, subprocess.CalledProcessError):
            return  # no engine: the stack fixture fails the tests with its own message
        self.snapshots_before = snapshot_resources(self.state)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # conftest.py marks every test that uses the stack; the mark travels in the report,
        # from a worker too.
        if "stack" in report.keywords:
            self.stack_tests_ran = True

    # An xdist hook: optional, so that the suite also starts where xdist is not installed.
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        for name, count in getattr(node, "workeroutput", {}).get(IDLE_KEY, {}).items():
            self.idle[name] = self.idle.get(name, 0) + count

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.stack_tests_ran or self.before is None:
            return
        left = self._leftovers()
        if not left:
            return
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "OpenSandbox resources left behind", red=True)
            reporter.write_line(self._message(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _leftovers(self) -> list[object]:
        if self.kubernetes:
            return self._batchsandbox_leftovers()
        # Drained before the containers are counted: what a pool still held is reported by
        # pool. Without xdist the pools live in this process.
        for name, count in warm_pools.drain_all().items():
            self.idle[name] = self.idle.get(name, 0) + count
        left: list[object] = [
            f"{n} idle sandboxes of warm pool {name}" for name, n in self.idle.items()
        ]
        assert self.before is not None
        left += leaks.leftovers(self.before)
        if self.state is not None:
            left += snapshot_leftovers(self.state, self.snapshots_before)
        return left

    def _batchsandbox_leftovers(self) -> list[object]:
        """The Kubernetes runtime's sandboxes are BatchSandboxes; Docker, which other runs
        share, is not looked at."""
        from dev.kube import opensandbox

        assert self.before is not None
        deadline = time.monotonic() + leaks.SETTLE_SECONDS
        while (left := opensandbox.batchsandboxes() - self.before) and time.monotonic() < deadline:
            time.sleep(0.5)
        found: list[object] = []
        found.extend(sorted(left))
        return found

    def _message(self, left: list[object]) -> str:
        if self.kubernetes:
            return (
                "These BatchSandboxes were created during the run and never removed: "
                + ", ".join(map(str, left))
                + ". Destroy every sandbox a test creates (a try/finally or a fixture)."
            )
        return (
            "These OpenSandbox resources were created during the run and never removed: "
            + ", ".join(map(str, left))
            + ". Destroy every sandbox a test creates, and delete every snapshot it makes (a "
            "try/finally or a fixture). If another test run shared this Docker engine meanwhile, "
            "its sandboxes and snapshots are listed too."
        )


def register(config: pytest.Config) -> None:
    if is_xdist_worker(config):
        config.pluginmanager.register(WarmPoolDrain(config), "opensandbox-warm-pool-drain")
    else:
        config.pluginmanager.register(LeakCheck(), "opensandbox-leak-check")
