"""``python -m benchmarks``: every case on the local stack in one run, then the table and its JSON.

Run it through ``make bench``, which brings the stack up first. Ratios are taken within this one
run because the machine is shared and noisy; absolute numbers from two runs do not compare.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import (
    children,
    emission,
    executor_overhead,
    latency,
    parsing,
    use_a_deployment_of_its_own,
    warm_pool,
    workloads,
)
from benchmarks.report import exit_status, render, write_json
from benchmarks.rows import build_rows
from benchmarks.subjects import BACKENDS, SUBJECTS, make_subject
from dev.stack.state import read_state

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts"
CASES = (
    "latency",
    "lines",
    "parsing",
    "no-newline",
    "export",
    "stall",
    "agents",
    "pool",
    "executor",
)


def run_children(requests: list[tuple[dict, float]], *, parallel: bool = False) -> list[dict]:
    log_dir = ARTIFACTS / "bench-logs"
    if not parallel:
        return [children.run(request, seconds, log_dir) for request, seconds in requests]
    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(lambda item: children.run(item[0], item[1], log_dir), requests))


def measure(names: list[str], cases: list[str]) -> dict:
    state = read_state()
    server = state.servers["plain"]
    raw: dict = {}
    if "latency" in cases:
        subjects = [make_subject(name, server, state.sandbox_image) for name in names]
        print("bench: (a) create + destroy ...", flush=True)
        raw["create_destroy"] = latency.create_destroy(subjects)
        print("bench: (b) echo hi ...", flush=True)
        raw["echo"] = latency.echo(subjects)
    if "lines" in cases:
        print("bench: (c) 200 MB of lines, and execd's own emission rates ...", flush=True)
        sdk = make_subject("sdk", server, state.sandbox_image)
        roomy = make_subject(
            "sdk", server, state.sandbox_image, workloads.NO_NEWLINE_SANDBOX_MEMORY
        )
        raw["emission"] = emission.measure(sdk, roomy)
        raw["lines"] = dict(
            zip(
                names,
                run_children(
                    [({"case": "lines", "subject": name}, workloads.LONG_TIMEOUT) for name in names]
                ),
                strict=True,
            )
        )
    if "parsing" in cases:
        print("bench: (c) the parser alone on plain lines and on one line of minified JSON ...")
        raw["parsing"] = parsing.measure()
    if "no-newline" in cases:
        print("bench: (d) one line with no newline ...", flush=True)
        sized = [(name, workloads.NO_NEWLINE_REDUCED_BYTES) for name in names]
        sized.append(("ours", workloads.NO_NEWLINE_BYTES))
        requests = [
            (
                {
                    "case": "no-newline",
                    "subject": name,
                    "bytes": size,
                    "memory": workloads.NO_NEWLINE_SANDBOX_MEMORY,
                },
                workloads.NO_NEWLINE_SECONDS,
            )
            for name, size in sized
        ]
        results = run_children(requests)
        raw["no_newline"] = {
            f"{name}@{size}": result for (name, size), result in zip(sized, results, strict=True)
        }
    if "export" in cases:
        print("bench: (e) export of 256 MiB ...", flush=True)
        requests = [({"case": "export", "subject": name}, workloads.LONG_TIMEOUT) for name in names]
        raw["export"] = dict(zip(names, run_children(requests), strict=True))
    if "stall" in cases:
        print("bench: stalled streams (in parallel; they only wait) ...", flush=True)
        requests = [
            ({"case": "stall", "subject": name, "kind": kind}, workloads.STALL_SECONDS)
            for kind in workloads.stall_kinds(state.runs_named("execd"))
            for name in names
        ]
        results = run_children(requests, parallel=True)
        raw["stall"] = {
            f"{request['kind']}:{request['subject']}": result
            for (request, _), result in zip(requests, results, strict=True)
        }
    if "agents" in cases:
        print(f"bench: (f) {workloads.AGENT_RUNS} concurrent agent runs ...", flush=True)
        backends = [name for name in names if name in BACKENDS]
        requests = [
            (
                {"case": "agents", "subject": name, "runs": workloads.AGENT_RUNS},
                workloads.AGENT_SECONDS,
            )
            for name in backends
        ]
        raw["agents"] = dict(zip(backends, run_children(requests), strict=True))
    if "pool" in cases:
        print(f"bench: (g) first command, cold and from a warm pool, {warm_pool.RUNS} each ...")
        raw["pool"] = warm_pool.measure(server, state.sandbox_image)
    if "executor" in cases:
        print(f"bench: (h) a task's overhead on each executor, {executor_overhead.RUNS} tries each")
        raw["executor"] = executor_overhead.measure(state)
    return raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated subset of {CASES}"
    )
    parser.add_argument("--json", type=Path, default=ARTIFACTS / "bench.json")
    args = parser.parse_args(argv)
    use_a_deployment_of_its_own()
    cases = [case for case in args.cases.split(",") if case]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose from {CASES}")
    # The SDK logs every create and retry at info; the table is what this run is for.
    logging.getLogger("opensandbox").setLevel(logging.ERROR)
    logging.getLogger("opensandbox_provider").setLevel(logging.WARNING)
    names = list(SUBJECTS)
    started = time.monotonic()
    raw = measure(names, cases)
    rows = build_rows(raw)
    elapsed = time.monotonic() - started
    print()
    print(render(rows))
    print(f"\nbench: {elapsed:.0f} s in all")
    context = {
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "subjects": names,
        "cases": cases,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "elapsed_s": elapsed,
    }
    write_json(args.json, rows, context, raw)
    shown = args.json.relative_to(REPO) if args.json.is_relative_to(REPO) else args.json
    print(f"bench: wrote {shown}")
    return exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
