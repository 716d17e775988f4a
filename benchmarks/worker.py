"""One measured operation for one subject in a fresh process: ``python -m benchmarks.worker JSON``.

A fresh process per measurement keeps one subject's garbage and allocator high-water mark out
of the next one's RSS delta. The process prints JSON lines on stdout: first the sandbox it
created, so the parent can destroy it should this process have to be killed, then the result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import statistics
import sys
import time

from benchmarks import workloads
from benchmarks.subjects import make_subject
from dev.stack.state import read_state
from tests.containers import run_frozen
from tests.peak_memory import MIB, peak_rss_delta


class Terminated(Exception):
    """The parent gave up on this measurement; unwind so the sandbox is destroyed."""


def _on_term(signum, frame):
    raise Terminated


class _CountingSink:
    """An export destination that keeps nothing, so only the backend's own memory is measured."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        return len(data)


def _emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def _timed(operation):
    started = time.monotonic()
    result, rss = peak_rss_delta(operation)
    return result, time.monotonic() - started, rss / MIB


def measure_output(subject, command: str, payload_bytes: int) -> dict:
    handle = subject.create()
    _emit(sandbox=handle)
    try:
        outcome, wall, rss = _timed(
            lambda: subject.run(
                handle, command, timeout=workloads.LONG_TIMEOUT, max_output_bytes=workloads.CAP
            )
        )
    finally:
        subject.destroy(handle)
    return {
        "wall_s": wall,
        "rss_delta_mib": rss,
        "mb_per_s": payload_bytes / 1e6 / wall,
        "payload_bytes": payload_bytes,
        "exit_code": outcome.exit_code,
        "retained_bytes": outcome.retained_bytes,
        "truncated": outcome.truncated,
    }


def measure_export(subject) -> dict:
    handle = subject.create()
    _emit(sandbox=handle)
    try:
        made = subject.run(
            handle,
            workloads.MAKE_EXPORT_FILE,
            timeout=workloads.LONG_TIMEOUT,
            max_output_bytes=4096,
        )
        if made.exit_code != 0:
            raise RuntimeError("Could not create the file to export in the sandbox.")
        rates, peaks = [], []
        for _ in range(workloads.EXPORT_RUNS):
            sink = _CountingSink()
            written, wall, rss = _timed(
                lambda sink=sink: subject.export(handle, workloads.EXPORT_PATH, sink)
            )
            if written != workloads.EXPORT_BYTES or sink.written != written:
                raise RuntimeError(f"The export copied {sink.written} bytes, not {written}.")
            rates.append(written / MIB / wall)
            peaks.append(rss)
    finally:
        subject.destroy(handle)
    return {"mb_per_s": statistics.median(rates), "rss_delta_mib": max(peaks), "rates": rates}


def measure_stall(subject, kind: str) -> dict:
    """How long a command on a stalled stream takes to come back, and how it comes back."""
    frozen = kind == "frozen"
    handle = subject.create(env=None if frozen else workloads.stall_env(kind))
    _emit(sandbox=handle)
    command, budget = workloads.stalled_command(kind)

    def run():
        return subject.run(handle, command, timeout=budget, max_output_bytes=workloads.CAP)

    started = time.monotonic()
    try:
        outcome = run_frozen(handle, workloads.FROZEN_MARKER, run) if frozen else run()
    finally:
        elapsed = time.monotonic() - started
        subject.destroy(handle)
    return {
        "wall_s": elapsed,
        "timed_out": outcome.timed_out,
        "sandbox_terminated": outcome.sandbox_terminated,
        "exit_code": outcome.exit_code,
    }


def measure_agents(subject, runs: int) -> dict:
    from airflow.providers.common.ai.toolsets import SandboxToolset

    from benchmarks.subjects import OPEN_SPEC
    from tests.reliability.scripted_agent import scripted_agent, succeeded

    async def one(index: int) -> bool:
        token = f"agent{index}"
        toolset = SandboxToolset(subject.backend, spec=OPEN_SPEC)
        try:
            result = await scripted_agent(token).run("Run the program.", toolsets=[toolset])
        except Exception as e:  # a failed run is a data point here, not a crash
            print(f"agent run {index} failed: {e!r}", file=sys.stderr)
            return False
        return succeeded(result.output, token)

    async def all_runs() -> list[bool]:
        return await asyncio.gather(*(one(i) for i in range(runs)))

    started = time.monotonic()
    outcomes = asyncio.run(all_runs())
    return {"wall_s": time.monotonic() - started, "successes": sum(outcomes), "runs": runs}


def main(request: dict) -> None:
    signal.signal(signal.SIGTERM, _on_term)
    logging.getLogger("opensandbox").setLevel(logging.ERROR)
    logging.getLogger("opensandbox_provider").setLevel(logging.WARNING)
    state = read_state()
    subject = make_subject(
        request["subject"],
        state.servers["plain"],
        state.sandbox_image,
        request.get("memory", "2Gi"),
    )
    case = request["case"]
    if case == "lines":
        result = measure_output(subject, workloads.LINES_COMMAND, workloads.LINES_BYTES)
    elif case == "no-newline":
        size = request["bytes"]
        result = measure_output(subject, workloads.no_newline_command(size), size)
    elif case == "export":
        result = measure_export(subject)
    elif case == "stall":
        result = measure_stall(subject, request["kind"])
    elif case == "agents":
        result = measure_agents(subject, request["runs"])
    else:
        raise ValueError(f"Unknown case {case!r}.")
    _emit(result=result)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
