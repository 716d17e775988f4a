"""Real network faults between the worker and the sandbox while a long command runs.

The worker runs in a network namespace of its own (see :mod:`tests.reliability.worker_namespace`)
and, during a 30-second command, its packets are delayed and lost, all dropped for 15 s, or
answered with TCP resets. Each fault is made for two workers at once, one reaching the sandbox
directly and one through the server's proxy, each in its own namespace. What is right: the
command's real end comes back (it exits 7 after its 30th line), the sandbox is still there with
what the command wrote, and a stream that broke says in stderr that output after the break may
be missing (the backend asked execd how the command ended, docs/backend.rst).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.containers import assert_no_container
from tests.reliability.conftest import OPEN
from tests.reliability.worker_namespace import WorkerNamespace

LINES = 30
COMMAND = (
    f"for i in $(seq 1 {LINES}); do echo line $i; echo $i > /tmp/progress; sleep 1; done; exit 7"
)
# The command's budget: far past its 30 s, so only a fault could make it time out.
BUDGET = 300.0
# The fault starts once this line has arrived, so the command is well under way.
FAULT_AFTER = "line 3"
# A command of 30 s, a fault of 15 s and the stall handling after it all end long before this.
RESULT_WITHIN = 150.0
BROKE = "output written after the break may be missing"
MODES = {"direct": False, "through-server": True}
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Worker:
    """``tests.reliability.namespace_worker`` in ``namespace``, its lines read on a thread."""

    mode: str
    namespace: WorkerNamespace
    conn_id: str
    sandbox: str
    # The host's backend for the sandbox: it made it, and checks and destroys it after.
    backend: Any
    # Where the worker's own log (its stderr) goes, quoted when it fails.
    log: Path
    command: str = COMMAND
    budget: float = BUDGET
    lines: list[str] = field(default_factory=list)
    outcome: dict | None = None
    _seen: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> None:
        argv = self.namespace.command(
            sys.executable,
            "-m",
            "tests.reliability.namespace_worker",
            self.conn_id,
            self.sandbox,
            str(self.budget),
            self.command,
        )
        with self.log.open("w") as log:
            self._process = subprocess.Popen(
                argv, cwd=REPO, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=log, text=True
            )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self._seen:
                if kind == "output":
                    self.lines.append(rest.partition(" ")[2])
                elif kind in ("result", "error"):
                    self.outcome = {"kind": kind, **json.loads(rest)}
                self._seen.notify_all()

    def wait_for(self, ready: Callable[[], bool], within: float, what: str) -> None:
        deadline = time.monotonic() + within
        with self._seen:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0 or self._process.poll() is not None and not ready():
                    tail = self.log.read_text(errors="replace")[-3000:]
                    pytest.fail(
                        f"[{self.mode}] {what} did not happen within {within:g} s; the "
                        f"worker's log ends:\n{tail}"
                    )
                self._seen.wait(min(left, 0.5))

    def finish(self) -> dict:
        self.wait_for(lambda: self.outcome is not None, RESULT_WITHIN, "the command's result")
        self._process.wait(timeout=30)
        assert self.outcome is not None
        return self.outcome

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


@pytest.fixture
def workers(make_backend, plain_server, sandboxes, tmp_path) -> Iterator[list[Worker]]:
    """A sandbox per mode, made from the host, and a worker in a namespace of its own for it."""
    made: list[Worker] = []
    with ExitStack() as cleanup:
        for index, (mode, through_server) in enumerate(MODES.items(), start=1):
            namespace = cleanup.enter_context(WorkerNamespace(index))
            conn_id = f"faults_{mode.replace('-', '_')}"
            backend = make_backend(plain_server, conn_id, use_server_proxy=through_server)
            handle = backend.create(spec=OPEN)
            sandboxes.append(handle)
            log = tmp_path / f"worker-{mode}.log"
            made.append(Worker(mode, namespace, conn_id, handle, backend, log))
        try:
            yield made
        finally:
            for worker in made:
                worker.stop()


def run_with_fault(
    workers: list[Worker], fault: Callable[[WorkerNamespace], None], seconds: float
) -> None:
    """Start every worker, make ``fault`` in each namespace once the command is under way, and
    take it back ``seconds`` later."""
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.wait_for(lambda w=worker: FAULT_AFTER in w.lines, 60, f"output {FAULT_AFTER!r}")
    for worker in workers:
        fault(worker.namespace)
    time.sleep(seconds)
    for worker in workers:
        worker.namespace.restore()
        worker.namespace.delay(0.0)


def assert_the_real_end_and_the_sandbox_kept(
    workers: list[Worker], record_property: Callable[[str, object], None]
) -> None:
    for worker in workers:
        outcome = worker.finish()
        assert outcome["kind"] == "result", f"[{worker.mode}] {outcome}"
        assert (outcome["exit_code"], outcome["timed_out"], outcome["sandbox_terminated"]) == (
            7,
            False,
            False,
        ), f"[{worker.mode}] {outcome}"
        assert "line 1\n" in outcome["stdout"]
        whole = f"line {LINES}\n" in outcome["stdout"]
        assert whole or BROKE in outcome["stderr"], f"[{worker.mode}] {outcome}"
        record_property(
            f"{worker.mode}_path", "the stream survived" if whole else "recovered from the status"
        )
        record_property(f"{worker.mode}_seconds", round(outcome["seconds"], 1))
        # The command ran to its end in a sandbox that is still there.
        backend = worker.backend
        after = backend.run_command(
            worker.sandbox, "cat /tmp/progress", timeout=30, max_output_bytes=100
        )
        assert after.stdout.strip() == str(LINES), f"[{worker.mode}] {after}"
        backend.destroy(worker.sandbox)
        assert_no_container(worker.sandbox)


@pytest.mark.slow
def test_latency_and_loss_during_a_long_command_lose_neither_the_result_nor_the_sandbox(
    workers, record_property
) -> None:
    def slow_and_lossy(namespace: WorkerNamespace) -> None:
        namespace.delay(0.3)
        namespace.lose(5)

    run_with_fault(workers, slow_and_lossy, seconds=15)
    assert_the_real_end_and_the_sandbox_kept(workers, record_property)


@pytest.mark.slow
def test_a_15_second_network_drop_during_a_long_command_loses_neither_the_result_nor_the_sandbox(
    workers, record_property
) -> None:
    run_with_fault(workers, WorkerNamespace.blackhole, seconds=15)
    assert_the_real_end_and_the_sandbox_kept(workers, record_property)


@pytest.mark.slow
def test_connections_reset_during_a_long_command_are_recovered_from_execds_status(
    workers, record_property
) -> None:
    run_with_fault(workers, WorkerNamespace.reset_connections, seconds=2)
    for worker in workers:
        assert BROKE in worker.finish()["stderr"], f"[{worker.mode}] the stream was not reset"
    assert_the_real_end_and_the_sandbox_kept(workers, record_property)


# The first frame carries this many bytes, more than any answer to a small request, so the
# stream's connection is the one that has received at least that much.
FIRST_FRAME_BYTES = 32 * 1024
DEADLINE = 2.0
STREAM_FROZEN_COMMAND = (
    f"head -c {FIRST_FRAME_BYTES} /dev/zero | tr '\\0' x; echo; echo first; sleep 30; echo late"
)
# What the backend promises for a stream silent past its deadline (docs/backend.rst): given
# up within 10 s of it.
GIVEN_UP_WITHIN = DEADLINE + 10.0


@pytest.mark.slow
def test_a_stream_frozen_after_its_first_frame_is_given_up_within_ten_seconds_of_its_deadline(
    workers, record_property
) -> None:
    # Real behaviour on any execd: the command prints, then only the stream's own connection
    # goes silent (nftables drops its packets); execd runs on, kills the command at its
    # deadline and answers every new connection, but the stream's end never arrives.
    for worker in workers:
        worker.command, worker.budget = STREAM_FROZEN_COMMAND, DEADLINE
        worker.start()
    for worker in workers:
        worker.wait_for(lambda w=worker: "first" in w.lines, 60, "output 'first'")
        frozen = worker.namespace.freeze_connections_that_received(FIRST_FRAME_BYTES)
        assert len(frozen) == 1, f"[{worker.mode}] froze {frozen}"
    for worker in workers:
        outcome = worker.finish()
        assert outcome["kind"] == "result", f"[{worker.mode}] {outcome}"
        # Counted from the command's first output, which came just after its start: the time
        # the worker took to reach the sandbox before is not the command's.
        took = outcome["seconds"] - outcome["first_output_seconds"]
        record_property(f"{worker.mode}_seconds", round(took, 2))
        print(
            f"\n[{worker.mode}] stream frozen past a 2 s deadline: returned {took:.2f}s after "
            f"the first output ({outcome['seconds']:.2f}s after the call)"
        )
        assert took < GIVEN_UP_WITHIN, f"[{worker.mode}] {outcome}"
        assert (outcome["exit_code"], outcome["timed_out"], outcome["sandbox_terminated"]) == (
            -1,
            True,
            False,
        ), f"[{worker.mode}] {outcome}"
        assert "deadline had passed" in outcome["stderr"], f"[{worker.mode}] {outcome}"
        assert "late" not in outcome["stdout"]
        # The sandbox is kept: a silent stream past its deadline says nothing against it.
        worker.namespace.restore()
        after = worker.backend.run_command(
            worker.sandbox, "echo still here", timeout=30, max_output_bytes=100
        )
        assert after.stdout == "still here\n", f"[{worker.mode}] {after}"
        worker.backend.destroy(worker.sandbox)
        assert_no_container(worker.sandbox)
