"""``python -m benchmarks``: every case on the local stack in one run, then the table and its JSON.

Run it through ``make bench``, which brings the stack up first. Ratios are taken within this one
run because the machine is shared and noisy; absolute numbers from two runs do not compare.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import children, emission, latency, parsing, workloads
from benchmarks.report import (
    Row,
    at_least,
    at_least_ratio,
    at_least_ratio_under,
    at_most,
    at_most_ratio,
    equals,
    render,
    write_json,
)
from benchmarks.subjects import BACKENDS, SUBJECTS, make_subject
from dev.stack.state import read_state
from opensandbox_provider.sandbox._execd import LIVENESS_PROBE_TIMEOUT, STALL_WINDOW

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts"
CASES = ("latency", "lines", "parsing", "no-newline", "export", "stall", "agents")


def available_subjects() -> list[str]:
    """Ours joins once the backend exists; until then the bench compares the other two."""
    if importlib.util.find_spec("opensandbox_provider.sandbox.backend") is None:
        print(
            "bench: our backend is not there yet; measuring the built-in backend and the SDK only."
        )
        return [name for name in SUBJECTS if name != "ours"]
    return list(SUBJECTS)


def run_children(requests: list[tuple[dict, float]], *, parallel: bool = False) -> list[dict]:
    log_dir = ARTIFACTS / "bench-logs"
    if not parallel:
        return [children.run(request, seconds, log_dir) for request, seconds in requests]
    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(lambda item: children.run(item[0], item[1], log_dir), requests))


# A silent stream is given up after the stall window and an unanswered ping, plus 2 s of slack.
NOTICED_WITHIN = STALL_WINDOW + LIVENESS_PROBE_TIMEOUT + 2


def _huge_line_gap_note(rate: dict) -> str:
    """The longest silence execd leaves while it sends a 1 GiB line, against the stall window,
    which must stay clear of it with half the window to spare."""
    gap = rate["huge_line_gap_s"]
    verdict = "clear, with margin" if gap <= STALL_WINDOW / 2 else "NOT clear with margin"
    return (
        f"while execd sends 1 GiB on one line ({rate['huge_line_s']:.1f} s to its terminal "
        f"event), the longest silence on the raw socket is {gap:.1f} s: the {STALL_WINDOW:g} s "
        f"stall window alone is {verdict}; a silence that long is a stall only when execd "
        f"answers no ping for {LIVENESS_PROBE_TIMEOUT:g} s after it."
    )


def _value(result: dict | None, key: str) -> float | None:
    if not result or "error" in result:
        return None
    return result.get(key)


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
        if "ours" in names:
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
    return raw


def _whole(result: dict) -> bool:
    """Whether an output case ran to its end: the command exited 0 and the cap cut its output."""
    return result.get("exit_code") == 0 and bool(result.get("truncated"))


def _no_newline_rows(results: dict) -> list[Row]:
    """Case (d): every subject at the reduced size, for the ratios, and ours alone at 1 GiB."""
    reduced, full = workloads.NO_NEWLINE_REDUCED_BYTES, workloads.NO_NEWLINE_BYTES
    at_reduced = {key.split("@")[0]: r for key, r in results.items() if key.endswith(f"@{reduced}")}
    at_full = {key.split("@")[0]: r for key, r in results.items() if key.endswith(f"@{full}")}
    notes = [
        f"{reduced // workloads.MIB} MiB for all three (1 GiB would take the SDK and the built-in "
        "backend minutes and gigabytes; 64 MiB once raised RSS by 515 MB); each bounded by "
        f"{workloads.NO_NEWLINE_SECONDS:g} s and an {children.ADDRESS_SPACE_LIMIT >> 30} GiB "
        "address space."
    ]
    for key, result in results.items():
        if "error" in result:
            notes.append(f"{key}: {result['error']}")
        elif not _whole(result):
            notes.append(
                f"{key} did not come back whole (exit {result.get('exit_code')}, "
                f"{result.get('retained_bytes')} bytes kept, truncated={result.get('truncated')}), "
                "so it is left out: a call that gave up early says nothing about its memory."
            )
    mib = f"{reduced // workloads.MIB} MiB"
    return [
        Row(
            "d",
            f"{mib} on one line: peak RSS delta",
            "MiB",
            {n: _value(r, "rss_delta_mib") if _whole(r) else None for n, r in at_reduced.items()},
            goals=[at_most(32, "MiB")],
            notes=notes,
        ),
        Row(
            "d",
            f"{mib} on one line: wall",
            "s",
            {n: _value(r, "wall_s") for n, r in at_reduced.items()},
        ),
        Row(
            "d",
            f"{full // workloads.MIB} MiB on one line: peak RSS delta",
            "MiB",
            {n: _value(r, "rss_delta_mib") if _whole(r) else None for n, r in at_full.items()},
            goals=[at_most(32, "MiB")],
        ),
    ]


def _parsing_rows(rates: dict) -> list[Row]:
    """The parser's own rate, in this process: plain lines, and escaped text on one line."""
    notes = [
        f"the event parser alone, fed {parsing.PARSED_BYTES // 1_000_000} MB of events in "
        "socket-sized reads, best of three; no stack, so only ours has a value."
    ]
    return [
        Row("4.4-parse", "parser: plain lines", "MB/s", {"ours": rates["plain_mb_per_s"]}, notes),
        Row(
            "4.4-parse",
            "parser: minified JSON on one line",
            "MB/s",
            {"ours": rates["escaped_mb_per_s"]},
            goals=[at_least(50, "MB/s")],
        ),
    ]


def build_rows(raw: dict) -> list[Row]:
    rows: list[Row] = []
    if "create_destroy" in raw:
        rows.append(
            Row(
                "a",
                "create + destroy, median of 20",
                "s",
                {name: summary["median_s"] for name, summary in raw["create_destroy"].items()},
                goals=[at_most_ratio("sdk", 1.05), at_most_ratio("sdk", 0.8)],
                notes=["goal 1.05x: no slower than the SDK; 0.8x: a faster create than the SDK's."],
            )
        )
    if "echo" in raw:
        rows.append(
            Row(
                "b",
                "`echo hi`, median of 50",
                "s",
                {name: summary["median_s"] for name, summary in raw["echo"].items()},
                goals=[at_most_ratio("sdk", 1.05), at_most(0.25, "s")],
                notes=[
                    "goal 1.05x: no slower than the SDK; 0.25 s: the result at the terminal event."
                ],
            )
        )
    if "lines" in raw:
        lines = raw["lines"]
        rows.append(
            Row(
                "c",
                "200 MB of lines at 50 KiB cap: wall",
                "s",
                {n: _value(r, "wall_s") for n, r in lines.items()},
            )
        )
        rows.append(
            Row(
                "c",
                "200 MB of lines: peak RSS delta",
                "MiB",
                {n: _value(r, "rss_delta_mib") for n, r in lines.items()},
                goals=[at_most(32, "MiB")],
            )
        )
        rate = raw["emission"]
        rows.append(
            Row(
                "4.4",
                "line output throughput",
                "MB/s",
                {n: _value(r, "mb_per_s") for n, r in lines.items()},
                goals=[at_least_ratio_under("sdk", 10, rate["wire_mb_per_s"])],
                notes=[
                    "execd's own ceilings: the sandbox makes the lines at "
                    f"{rate['generator_mb_per_s']:.0f} MB/s (to /dev/null, timed inside); "
                    f"execd puts them on the wire at {rate['wire_mb_per_s']:.1f} MB/s to a "
                    f"reader that counts socket bytes and decodes nothing "
                    f"({rate['wire_bytes'] / 1e6:.0f} MB of chunked events in "
                    f"{rate['wire_s']:.1f} s).",
                    _huge_line_gap_note(rate),
                ],
            )
        )
    if "parsing" in raw:
        rows += _parsing_rows(raw["parsing"])
    if "no_newline" in raw:
        rows += _no_newline_rows(raw["no_newline"])
    if "export" in raw:
        results = raw["export"]
        rows.append(
            Row(
                "e",
                f"export 256 MiB: rate, median of {workloads.EXPORT_RUNS}",
                "MiB/s",
                {n: _value(r, "mb_per_s") for n, r in results.items()},
                goals=[at_least_ratio("sdk", 0.9)],
                notes=["sdk = files.read_bytes_stream into the same counting sink."],
            )
        )
        rows.append(
            Row(
                "e",
                f"export 256 MiB: peak RSS delta, highest of {workloads.EXPORT_RUNS}",
                "MiB",
                {n: _value(r, "rss_delta_mib") for n, r in results.items()},
                goals=[at_most(32, "MiB")],
            )
        )
    if "stall" in raw:
        for kind, goals, title in (
            ("frozen", [at_most(NOTICED_WITHIN, "s")], "frozen container: call returns after"),
            ("silent", [at_most(NOTICED_WITHIN, "s")], "silent stall: call returns after"),
            ("heartbeat", [], "heartbeats, never ends, 20 s budget: call returns after"),
        ):
            results = {
                name.split(":")[1]: r
                for name, r in raw["stall"].items()
                if name.startswith(kind + ":")
            }
            if not results:
                continue  # the stand-in's stall switch, not run on a named execd
            notes = [
                f"{name}: {'' if r.get('timed_out') else 'NOT '}timed_out, "
                f"{'' if r.get('sandbox_terminated') else 'NOT '}sandbox_terminated"
                if "error" not in r
                else f"{name}: {r['error']} (no result)"
                for name, r in results.items()
            ]
            rows.append(
                Row(
                    f"4.3-{kind}",
                    title,
                    "s",
                    {n: _value(r, "wall_s") for n, r in results.items()},
                    goals=goals,
                    notes=notes,
                )
            )
    if "agents" in raw:
        results = raw["agents"]
        rows.append(
            Row(
                "f",
                f"{workloads.AGENT_RUNS} concurrent agent runs: successes",
                "runs",
                {n: _value(r, "successes") for n, r in results.items()},
                goals=[equals(workloads.AGENT_RUNS, "runs")],
                notes=["the SDK has no SandboxBackend, so it has no agent runs."],
            )
        )
        rows.append(
            Row(
                "f",
                f"{workloads.AGENT_RUNS} concurrent agent runs: wall",
                "s",
                {n: _value(r, "wall_s") for n, r in results.items()},
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated subset of {CASES}"
    )
    parser.add_argument("--json", type=Path, default=ARTIFACTS / "bench.json")
    args = parser.parse_args(argv)
    cases = [case for case in args.cases.split(",") if case]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose from {CASES}")
    # The SDK logs every create and retry at info; the table is what this run is for.
    logging.getLogger("opensandbox").setLevel(logging.ERROR)
    logging.getLogger("opensandbox_provider").setLevel(logging.WARNING)
    names = available_subjects()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
