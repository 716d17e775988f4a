"""``python -m benchmarks.load``: concurrent agent runs from several worker processes against one
server, with that server killed and restarted mid-run and a worker's network broken.

Run it through ``make load`` (docs/verification.rst, "Load and soak"), which brings the stack up
first. By default: 4 worker processes of 8 concurrent runs each, 32 in all, against a server of
the run's own (so killing it disturbs nothing else), two workers reaching execd directly and
two through the server's proxy. Each run's command lasts ``COMMAND_SECONDS``, and once every
run's command is under way:

- the last worker, which runs in a network namespace of its own (the harness of
  ``tests/reliability/test_network_faults.py``), gets 300 ms of latency and 5 % loss for 15 s,
  then, after a quiet 20 s, loses every packet for 15 s;
- 5 s into the loss, the server is killed (SIGKILL) and started again.

What is right: every run ends with its result or a clear error (the backend's error, with a
message), no worker hangs, no container is left. The figures (runs, outcomes, times, which runs
the faults landed in) go to stdout and ``artifacts/load.json``; the exit status is 1 when a
check failed.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import use_a_deployment_of_its_own
from benchmarks.agent_process import REPO, AgentProcess
from benchmarks.run_outcomes import judge, left_behind
from dev.stack.images import ImageChoice
from dev.stack.state import read_state
from tests.reliability.cleanup import destroy_directly
from tests.reliability.own_server import OwnServer
from tests.reliability.worker_namespace import WorkerNamespace

ARTIFACTS = REPO / "artifacts"
COMMAND_SECONDS = 120
# What each run's command does before it runs the agent's program: long enough that the faults
# land while it runs, printing a line a second so a stream that broke has lost something.
COMMAND = f"for i in $(seq 1 {COMMAND_SECONDS}); do echo tick $i; sleep 1; done"
COMMAND_TIMEOUT = 300.0
# How long every run's command may take to be under way (32 sandboxes made on two cores).
START_WITHIN = 300.0
# How long a worker may take to end once the faults are over, before it counts as hung.
FINISH_WITHIN = 600.0
NAMESPACE_INDEX = 9
QUIET_SECONDS = 20


def _faults(
    namespace: WorkerNamespace, server: OwnServer, timeline: dict, quiet_seconds: float
) -> None:
    """Latency and loss for 15 s with the server killed and restarted within them, a quiet
    ``quiet_seconds``, then every packet lost for 15 s; each step's time goes into ``timeline``.

    The quiet spell keeps the two outages apart: back to back, the faulted worker (which goes
    through the server) would be cut off for the server's restart plus the 15 s drop, close to
    the 30 s for which the backend waits for a silent execd before it gives a command up.
    """
    started = time.time()
    timeline["lossy_from"] = started
    namespace.delay(0.3)
    namespace.lose(5)
    time.sleep(5)
    timeline["server_killed"] = time.time()
    server.kill()
    time.sleep(5)
    server.start()
    timeline["server_back"] = time.time()
    time.sleep(max(0.0, started + 15 - time.time()))
    namespace.restore()
    namespace.delay(0.0)
    timeline["lossy_to"] = time.time()
    time.sleep(quiet_seconds)
    timeline["blackhole_from"] = time.time()
    namespace.blackhole()
    time.sleep(15)
    namespace.restore()
    timeline["faults_over"] = time.time()


def _overlapped(worker: AgentProcess, since: float, until: float) -> int:
    """How many of the worker's commands were running at some moment of [since, until]."""
    starts = {e["handle"]: e["at"] for e in worker.of("command") if e["command"] == "started"}
    ends = {e["handle"]: e["at"] for e in worker.of("command") if e["command"] != "started"}
    return sum(1 for h, at in starts.items() if at <= until and ends.get(h, until) >= since)


def _command_ends(worker: AgentProcess) -> dict[str, int]:
    """How the worker's commands came back: ``exit 0``, ``timed out``, ``raised``..."""
    ends: dict[str, int] = {}
    for event in worker.of("command"):
        if event["command"] == "started":
            continue
        if event["command"] == "raised":
            end = f"raised {event['error']}"
        elif event["sandbox_terminated"] or event["timed_out"]:
            end = "sandbox terminated" if event["sandbox_terminated"] else "timed out"
        else:
            end = f"exit {event['exit_code']}"
        ends[end] = ends.get(end, 0) + 1
    return ends


def run(workers: int, per_worker: int, log_dir: Path, quiet_seconds: float) -> dict:
    state = read_state()
    server = OwnServer(secrets.token_urlsafe(24), ImageChoice(state.images, state.image_kinds))
    faulted = workers - 1
    timeline: dict[str, float] = {}
    processes: list[AgentProcess] = []
    with ExitStack() as cleanup:
        server.start()
        cleanup.callback(server.stop)
        namespace = cleanup.enter_context(WorkerNamespace(NAMESPACE_INDEX))
        began = time.time()
        for index in range(workers):
            worker = AgentProcess.on(
                server.info,
                f"worker{index}",
                through_server=index >= workers // 2,
                log_dir=log_dir,
                prefix=namespace.command() if index == faulted else None,
                image=state.sandbox_image,
                concurrent=per_worker,
                command=COMMAND,
                command_timeout=COMMAND_TIMEOUT,
            )
            processes.append(worker)
        total = workers * per_worker
        print(f"load: {workers} workers x {per_worker} runs started", flush=True)

        def under_way() -> int:
            return sum(1 for p in processes for e in p.of("command") if e["command"] == "started")

        deadline = time.monotonic() + START_WITHIN
        while under_way() < total and time.monotonic() < deadline:
            if all(p.process.poll() is not None for p in processes):
                break
            time.sleep(1)
        timeline["commands_under_way"] = time.time()
        print(f"load: {under_way()}/{total} commands under way; faults now", flush=True)
        _faults(namespace, server, timeline, quiet_seconds)
        print("load: faults over; waiting for the runs to end", flush=True)
        finish_by = time.monotonic() + FINISH_WITHIN
        for process in processes:
            process.finish(max(1.0, finish_by - time.monotonic()))
        ended = time.time()
        sandboxes = [s for p in processes for s in p.sandboxes]
        left = left_behind(sandboxes)
        # Whatever a hung or failed worker left is destroyed, after it was counted.
        destroy_directly(server.info, list(left))
    return _figures(processes, timeline, began, ended, total, left, faulted)


def _figures(processes, timeline, began, ended, total, left, faulted) -> dict:
    runs = [{**e, "verdict": judge(e)} for p in processes for e in p.of("run")]
    outcomes: dict[str, int] = {}
    for entry in runs:
        outcomes[entry["verdict"]] = outcomes.get(entry["verdict"], 0) + 1
    seconds = sorted(entry["seconds"] for entry in runs)
    fault_from, fault_to = timeline["lossy_from"], timeline["faults_over"]
    per_worker = {}
    for index, process in enumerate(processes):
        mine = [entry for entry in runs if entry["worker"] == process.name]
        per_worker[process.name] = {
            "path": "through the server" if index >= len(processes) // 2 else "direct",
            "network faults": index == faulted,
            "runs ended": len(mine),
            "succeeded": sum(1 for entry in mine if entry["verdict"] == "succeeded"),
            "commands the faults landed in": _overlapped(process, fault_from, fault_to),
            "command ends": _command_ends(process),
            "exit status": process.process.returncode,
            "hung": process.hung,
        }
    problems = []
    if len(runs) < total:
        problems.append(f"{total - len(runs)} runs never reported an end")
    problems += [
        f"{entry['worker']} run {entry['run']}: {entry}"
        for entry in runs
        if entry["verdict"] == "unclear"
    ]
    problems += [f"{p.name} hung; its log ends: {p.log_tail(800)}" for p in processes if p.hung]
    problems += [f"sandbox {sandbox} left containers {names}" for sandbox, names in left.items()]
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": total,
        "outcomes": outcomes,
        "wall_s": round(ended - began, 1),
        "run_seconds": {
            "median": round(statistics.median(seconds), 1) if seconds else None,
            "max": round(seconds[-1], 1) if seconds else None,
        },
        "server_down_s": round(timeline["server_back"] - timeline["server_killed"], 1),
        "timeline_s": {key: round(at - began, 1) for key, at in timeline.items()},
        "workers": per_worker,
        "errors": [entry["errors"] for entry in runs if entry["verdict"] == "clear"],
        "answers": [entry["answer"] for entry in runs if entry["verdict"] == "answered"],
        "containers_left": left,
        "problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--runs-per-worker", type=int, default=8)
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=QUIET_SECONDS,
        help="between the lossy spell and the drop; 0 puts the two outages back to back",
    )
    options = parser.parse_args()
    use_a_deployment_of_its_own()
    figures = run(
        options.workers, options.runs_per_worker, ARTIFACTS / "load-logs", options.quiet_seconds
    )
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "load.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(
        json.dumps({k: v for k, v in figures.items() if k not in ("errors", "answers")}, indent=2)
    )
    for problem in figures["problems"]:
        print(f"load: FAILED: {problem}", file=sys.stderr)
    return 1 if figures["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
