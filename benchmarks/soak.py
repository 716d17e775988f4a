"""``python -m benchmarks.soak``: back-to-back agent runs for half an hour, and whether the
worker's memory and open file descriptors stay flat.

Run it through ``make soak`` (docs/verification.rst, "Load and soak"); ``--minutes`` shortens
it. Two worker processes run side by side on the stack's plain server, one reaching execd
directly and one through the server's proxy, each one agent run after another, each run in a
sandbox of its own. After every run a worker reports its resident memory (``VmRSS``), its
open file descriptors and the blocks Python's allocator holds.

The first ``WARM_UP_SHARE`` of the time is warm-up (imports finishing, pools and caches
filling). Over the rest, the least-squares slopes of memory and descriptors are what must be
flat. A worker makes some 250 runs in 10 minutes here, so a leak of 10 KiB a run passes the
memory bound, and one descriptor a run passes its bound hundreds of times over. Figures go to
stdout and ``artifacts/soak.json``; the exit status is 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime

from benchmarks import use_a_deployment_of_its_own
from benchmarks.agent_process import REPO, AgentProcess
from benchmarks.run_outcomes import judge, left_behind
from dev.stack.state import read_state
from tests.reliability.cleanup import destroy_directly

ARTIFACTS = REPO / "artifacts"
MIB = 1024 * 1024
# The first half is warm-up. Bounded caches fill over the first couple of hundred runs and
# then hold: urllib's parse cache (128 entries) sees each sandbox's own address, and Python's
# allocated blocks were seen to climb for about eight minutes and then stay flat. A leak keeps
# climbing through the second half; a cache that filled does not.
WARM_UP_SHARE = 0.5
# The bounds of "flat", per 10 minutes after warm-up.
RSS_SLOPE_BOUND_MIB = 2.0
FD_SLOPE_BOUND = 0.5
# A run that takes longer than this is a worker that hung.
RUN_WITHIN = 300.0
PATHS = {"direct": False, "through-server": True}


def slope_per_10_minutes(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``(seconds, value)`` points, per 10 minutes."""
    if len(points) < 3:
        return None
    count = len(points)
    mean_t = sum(t for t, _ in points) / count
    mean_v = sum(v for _, v in points) / count
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return None
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / spread
    return slope * 600


def _measured(process: AgentProcess, began: float, warm_up_s: float) -> dict:
    samples = process.of("sample")
    after = [s for s in samples if s["at"] - began >= warm_up_s]
    rss = [(s["at"] - began, s["rss"] / MIB) for s in after]
    fds = [(s["at"] - began, float(s["fds"])) for s in after]
    blocks = [(s["at"] - began, float(s["python_blocks"])) for s in after]
    # The C allocator's figures, where the worker's libc gives them (glibc 2.33 and later).
    heap = [s for s in after if s.get("heap_in_use") is not None]
    in_use = [(s["at"] - began, s["heap_in_use"] / MIB) for s in heap]
    kept_free = [(s["at"] - began, s["heap_kept_free"] / MIB) for s in heap]
    first, last = (after[0], after[-1]) if after else (None, None)
    return {
        "runs": len(process.of("run")),
        "verdicts": [judge(run) for run in process.of("run")],
        "samples_after_warm_up": len(after),
        "rss_mib": {
            "at start": round(samples[0]["rss"] / MIB, 1) if samples else None,
            "after warm-up": round(first["rss"] / MIB, 1) if first else None,
            "at end": round(last["rss"] / MIB, 1) if last else None,
            "slope per 10 min": _rounded(slope_per_10_minutes(rss), 2),
        },
        "open_fds": {
            "at start": samples[0]["fds"] if samples else None,
            "after warm-up": first["fds"] if first else None,
            "at end": last["fds"] if last else None,
            "slope per 10 min": _rounded(slope_per_10_minutes(fds), 3),
        },
        "python_blocks": {
            "after warm-up": first["python_blocks"] if first else None,
            "at end": last["python_blocks"] if last else None,
            "slope per 10 min": _rounded(slope_per_10_minutes(blocks), 0),
        },
        "native_heap_mib": {
            "in use after warm-up": round(in_use[0][1], 1) if in_use else None,
            "in use at end": round(in_use[-1][1], 1) if in_use else None,
            "in use slope per 10 min": _rounded(slope_per_10_minutes(in_use), 2),
            "kept free slope per 10 min": _rounded(slope_per_10_minutes(kept_free), 2),
        },
        "threads at end": last["threads"] if last else None,
        # Every sample, to see a climb's shape: steady, in steps, levelling off.
        "samples": [
            [
                round(s["at"] - began, 1),
                s["rss"],
                s["fds"],
                s["python_blocks"],
                s.get("heap_in_use"),
                s.get("heap_kept_free"),
            ]
            for s in samples
        ],
        "hung": process.hung,
    }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _problems(name: str, figures: dict) -> list[str]:
    problems = []
    rss, fds = figures["rss_mib"]["slope per 10 min"], figures["open_fds"]["slope per 10 min"]
    if rss is None or fds is None:
        problems.append(f"{name}: too few samples after warm-up to fit a slope")
    else:
        if rss > RSS_SLOPE_BOUND_MIB:
            problems.append(f"{name}: RSS grows {rss} MiB per 10 min (bound {RSS_SLOPE_BOUND_MIB})")
        if fds > FD_SLOPE_BOUND:
            problems.append(f"{name}: open fds grow {fds} per 10 min (bound {FD_SLOPE_BOUND})")
    in_use = figures["native_heap_mib"]["in use slope per 10 min"]
    if in_use is not None and in_use > RSS_SLOPE_BOUND_MIB:
        problems.append(
            f"{name}: the C allocator's memory in use grows {in_use} MiB per 10 min "
            f"(bound {RSS_SLOPE_BOUND_MIB})"
        )
    failed = [v for v in figures["verdicts"] if v != "succeeded"]
    if failed:
        problems.append(f"{name}: {len(failed)} of {figures['runs']} runs did not succeed")
    if figures["hung"]:
        problems.append(f"{name}: a run took longer than {RUN_WITHIN:g} s")
    return problems


def run(minutes: float, name: str, *, sdk_telemetry: bool = True) -> dict:
    state = read_state()
    server = state.servers["plain"]
    seconds = minutes * 60
    began = time.time()
    processes = []
    for path, through_server in PATHS.items():
        worker = AgentProcess.on(
            server,
            f"{name}-{path}",
            through_server=through_server,
            log_dir=ARTIFACTS / f"{name}-logs",
            sdk_telemetry=sdk_telemetry,
            image=state.sandbox_image,
            seconds=seconds,
        )
        processes.append(worker)
    print(f"soak: {minutes:g} min of back-to-back runs, direct and through the server", flush=True)
    for process in processes:
        # A worker checks the clock between runs, so it ends within one run of the time.
        process.finish(seconds + RUN_WITHIN)
    sandboxes = [s for p in processes for s in p.sandboxes]
    left = left_behind(sandboxes)
    destroy_directly(server, list(left))
    figures = {
        name: _measured(p, began, seconds * WARM_UP_SHARE)
        for name, p in zip(PATHS, processes, strict=True)
    }
    problems = [problem for name, f in figures.items() for problem in _problems(name, f)]
    problems += [f"sandbox {sandbox} left containers {names}" for sandbox, names in left.items()]
    for f in figures.values():
        f.pop("verdicts")
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "minutes": minutes,
        "sdk_telemetry": sdk_telemetry,
        "warm_up_minutes": round(minutes * WARM_UP_SHARE, 1),
        "bounds per 10 min": {"rss_mib": RSS_SLOPE_BOUND_MIB, "open_fds": FD_SLOPE_BOUND},
        "workers": figures,
        "containers_left": left,
        "problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument(
        "--name", default="soak", help="of the figures' file and the logs' folder in artifacts/"
    )
    parser.add_argument(
        "--without-sdk-telemetry",
        action="store_true",
        help="turn off the SDK's report of each create to the server "
        "(OPENSANDBOX_DISABLE_METRICS=1), as every test does",
    )
    options = parser.parse_args()
    use_a_deployment_of_its_own()
    figures = run(options.minutes, options.name, sdk_telemetry=not options.without_sdk_telemetry)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"{options.name}.json").write_text(json.dumps(figures, indent=2) + "\n")
    shown = {
        **figures,
        "workers": {
            name: {key: value for key, value in worker.items() if key != "samples"}
            for name, worker in figures["workers"].items()
        },
    }
    print(json.dumps(shown, indent=2))
    for problem in figures["problems"]:
        print(f"soak: FAILED: {problem}", file=sys.stderr)
    return 1 if figures["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
