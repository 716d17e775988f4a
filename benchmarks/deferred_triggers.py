"""``python -m benchmarks.deferred_triggers [--tasks N]``: what N deferred tasks cost a triggerer.

A triggerer runs every deferred task's trigger on one event loop. This stands one up without
Airflow's scheduler: N operators (50 unless given) on the local stack's plain server each start
a command in a small sandbox of their own and defer, as a worker does; a child process, the
triggerer, rebuilds each trigger from its serialized arguments, as a triggerer does, and runs
all N concurrently on one loop. The command prints a line and waits for a file; once every
trigger has logged that line, all N are waiting, and the child's resident memory and thread
count (``/proc/<pid>/status``) are sampled for a window. Then the file is written into every
sandbox, each trigger must fire an ``ended`` event with the command's exit code, and every
sandbox is destroyed, whatever happened.

The child imports the trigger from wherever ``PYTHONPATH`` points, so running this once on one
checkout and once on another compares their triggers on the same machine and stack. It prints
one JSON object: the child's RSS idle (everything imported, no trigger yet), its peak while the
triggers start and while all wait, and its thread counts at the same moments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import selectors
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import use_a_deployment_of_its_own

CONN_ID = "opensandbox_bench"
# The command each task runs: a line the trigger logs, then a wait for the release file.
RELEASE_FILE = "/tmp/.bench-release"
WAITING_LINE = "waiting"
EXIT_CODE = 3
COMMAND = (
    f"echo {WAITING_LINE}; while [ ! -e {RELEASE_FILE} ]; do sleep 0.5; done; exit {EXIT_CODE}"
)
# The smallest sandboxes that run a shell loop, so that 50 fit beside everything else.
CPU, MEMORY = "100m", "256Mi"
# How many operators create and defer at once, and how many release files are written at once.
PARALLEL = 10
# How long the child is watched with everything imported and no trigger yet.
IDLE_SECONDS = 3.0
SAMPLE_EVERY = 0.25
# Past this, the triggers that have not yet logged the waiting line fail the run.
ALL_WAITING_WITHIN = 180.0
EVENTS_WITHIN = 120.0
MIB = 1024 * 1024
# What the triggerer says, each at the start of a line of its own: everything is imported, every
# trigger is waiting, and (followed by them as JSON) the events.
IDLE, ALL_WAITING, EVENTS = "bench-idle", "bench-all-waiting", "bench-events"


def status_of(pid: int) -> tuple[int, int]:
    """The process's resident memory in bytes and its thread count, from ``/proc``."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"])


class Samples:
    """The peaks of a process's resident memory and thread count over a phase."""

    def __init__(self) -> None:
        self.rss = 0
        self.threads = 0

    def take(self, pid: int) -> None:
        rss, threads = status_of(pid)
        self.rss, self.threads = max(self.rss, rss), max(self.threads, threads)

    def as_dict(self, phase: str) -> dict[str, float]:
        return {f"rss_mib_{phase}": round(self.rss / MIB, 1), f"threads_{phase}": self.threads}


# --- The worker's side: sandboxes, commands, deferrals ---


def defer(index: int) -> dict[str, Any]:
    """One task run as a worker runs it up to its deferral; the trigger's serialized arguments."""
    from airflow.exceptions import TaskDeferred
    from airflow.providers.common.ai.sandbox.base import SandboxSpec

    from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

    operator = OpenSandboxOperator(
        task_id=f"deferred_{index}",
        command=COMMAND,
        cpu=CPU,
        memory=MEMORY,
        spec=SandboxSpec(block_network=False),
        opensandbox_conn_id=CONN_ID,
        deferrable=True,
        poll_interval=1.0,
        command_timeout=900.0,
    )
    try:
        operator.execute({})
    except TaskDeferred as deferral:
        return deferral.trigger.serialize()[1]
    raise AssertionError(f"Task {index} finished without deferring.")


def release(sandbox: str) -> None:
    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

    OpenSandboxBackend(CONN_ID).write_file(sandbox, RELEASE_FILE, b"")


def destroy(sandbox: str) -> None:
    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

    OpenSandboxBackend(CONN_ID).destroy(sandbox)


def measure(tasks: int, window: float) -> dict[str, Any]:
    from dev.stack.state import read_state

    os.environ.update(read_state().servers["plain"].airflow_connection_env(CONN_ID))
    # As in the tests: no SDK telemetry after each create. The triggerer inherits it.
    use_a_deployment_of_its_own()
    os.environ["OPENSANDBOX_DISABLE_METRICS"] = "1"
    sandboxes: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        try:
            with ThreadPoolExecutor(PARALLEL) as pool:
                for index, arguments in enumerate(pool.map(defer, range(tasks))):
                    sandboxes.append(arguments["sandbox"])
                    (Path(scratch) / f"{index}.json").write_text(json.dumps(arguments))
            return _watch(scratch, sandboxes, window)
        finally:
            with ThreadPoolExecutor(PARALLEL) as pool:
                list(pool.map(destroy, sandboxes))


def _watch(scratch: str, sandboxes: list[str], window: float) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.deferred_triggers", "--triggerer", scratch],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        _sampling_until(child, IDLE, Samples(), ALL_WAITING_WITHIN)
        idle = Samples()
        for _ in range(int(IDLE_SECONDS / SAMPLE_EVERY)):
            idle.take(child.pid)
            time.sleep(SAMPLE_EVERY)
        starting, began = Samples(), time.monotonic()
        child.stdin.write("go\n")
        child.stdin.flush()
        _sampling_until(child, ALL_WAITING, starting, ALL_WAITING_WITHIN)
        took = time.monotonic() - began
        waiting = Samples()
        until = time.monotonic() + window
        while time.monotonic() < until:
            waiting.take(child.pid)
            time.sleep(SAMPLE_EVERY)
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(release, sandboxes))
        events = json.loads(_sampling_until(child, EVENTS, Samples(), EVENTS_WITHIN))
    finally:
        child.kill()
        child.wait()
    wrong = [e for e in events if (e.get("status"), e.get("exit_code")) != ("ended", EXIT_CODE)]
    assert len(events) == len(sandboxes) and not wrong, wrong or events
    return {
        "deferred_tasks": len(sandboxes),
        "seconds_until_all_waiting": round(took, 1),
        "window_seconds": window,
        **idle.as_dict("idle"),
        **starting.as_dict("peak_starting"),
        **waiting.as_dict("peak_all_waiting"),
        "events_ended_with_exit_code": EXIT_CODE,
    }


def _sampling_until(
    child: subprocess.Popen[str], marker: str, samples: Samples, within: float
) -> str:
    """
    What follows ``marker`` on the child's next line that starts with it, the child's memory
    and threads sampled meanwhile. Lines without it (a library's own output) are passed over.
    """
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        samples.take(child.pid)
        if not selector.select(SAMPLE_EVERY):
            continue
        line = child.stdout.readline()
        if not line:
            raise AssertionError(f"The triggerer exited before it said {marker!r}.")
        if line.startswith(marker):
            return line[len(marker) :].strip()
    raise AssertionError(f"The triggerer had not said {marker!r} within {within:g}s.")


# --- The triggerer's side: every trigger on one loop ---


class _WaitingLines(logging.Handler):
    """Counts the triggers that have logged the command's waiting line."""

    def __init__(self, triggers: int, all_waiting: asyncio.Event) -> None:
        super().__init__()
        self.left = triggers
        self.all_waiting = all_waiting

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == f"[sandbox stdout] {WAITING_LINE}":
            self.left -= 1
            if self.left == 0:
                print(ALL_WAITING, flush=True)
                self.all_waiting.set()


def triggerer(scratch: str) -> None:
    from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger

    arguments = [json.loads(p.read_text()) for p in sorted(Path(scratch).glob("*.json"))]
    log = logging.getLogger("bench.triggerer")
    log.propagate = False
    # Airflow's trigger logger is routed only inside a triggerer; here one of its own.
    OpenSandboxCommandTrigger.log = property(lambda self: log)  # type: ignore[assignment, method-assign]
    print(IDLE, flush=True)
    assert sys.stdin.readline().strip() == "go"

    async def run_all() -> list[dict[str, Any]]:
        all_waiting = asyncio.Event()
        log.addHandler(_WaitingLines(len(arguments), all_waiting))
        log.setLevel(logging.INFO)

        async def first_event(trigger: OpenSandboxCommandTrigger) -> dict[str, Any]:
            async for event in trigger.run():
                return event.payload
            raise AssertionError("A trigger ended without an event.")

        return list(
            await asyncio.wait_for(
                asyncio.gather(*(first_event(OpenSandboxCommandTrigger(**a)) for a in arguments)),
                ALL_WAITING_WITHIN + EVENTS_WITHIN,
            )
        )

    print(EVENTS, json.dumps(asyncio.run(run_all())), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--window", type=float, default=20.0, help="seconds all are watched")
    parser.add_argument("--triggerer", metavar="DIR", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.triggerer:
        triggerer(options.triggerer)
        return
    print(json.dumps(measure(options.tasks, options.window), indent=2))


if __name__ == "__main__":
    main()
