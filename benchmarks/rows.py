"""The table's rows as data: which results each row reads, and the goals and notes it carries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks import children, executor_overhead, parsing, warm_pool, workloads
from benchmarks.report import (
    Goal,
    Row,
    at_least,
    at_least_ratio,
    at_least_ratio_under,
    at_most,
    at_most_ratio,
    equals,
)
from opensandbox_provider.execd._execd import LIVENESS_PROBE_TIMEOUT, STALL_WINDOW

# A silent stream is given up after the stall window and an unanswered ping, plus 2 s of slack.
NOTICED_WITHIN = STALL_WINDOW + LIVENESS_PROBE_TIMEOUT + 2
# The worker-memory goal, for every row that measures a peak RSS delta.
WORKER_MEMORY = at_most(32, "MiB")
NO_SLOWER_THAN_SDK = at_most_ratio("sdk", 1.05)
STALL_NOTICED = at_most(NOTICED_WITHIN, "s")
# A stream silent past its deadline is given up within 10 s of it (docs/backend.rst).
DEAD_STREAM_GIVEN_UP = at_most(workloads.DEAD_STREAM_DEADLINE + 10, "s")
# Case (d) measures every subject at the reduced size, for the ratios, and ours alone at 1 GiB.
REDUCED, FULL = workloads.NO_NEWLINE_REDUCED_BYTES, workloads.NO_NEWLINE_BYTES

# One row's results: each subject's result, by the subject's name.
Results = dict[str, dict]


def _value(result: dict | None, key: str) -> float | None:
    if not result or "error" in result:
        return None
    return result.get(key)


def _whole(result: dict) -> bool:
    """Whether an output case ran to its end: the command exited 0 and the cap cut its output."""
    return result.get("exit_code") == 0 and bool(result.get("truncated"))


def _always(result: dict) -> bool:
    return True


@dataclass(frozen=True)
class RowDef:
    """One row of the table; ``build`` makes it from a run's raw results, or nothing if its case
    was not run."""

    key: str
    title: str
    unit: str
    # The row's results by subject, or None when its case was not run.
    results: Callable[[dict], Results | None]
    # The field of each subject's result that the row shows.
    field: str
    # Goals and notes are fixed, or made from the raw results and the row's own.
    goals: Sequence[Goal] | Callable[[dict], Sequence[Goal]] = ()
    notes: Sequence[str] | Callable[[dict, Results], Sequence[str]] = ()
    # Whether a subject's result counts for the row; one that does not shows no value.
    counts: Callable[[dict], bool] = _always

    def build(self, raw: dict) -> Row | None:
        results = self.results(raw)
        if results is None:
            return None
        values = {n: _value(r, self.field) if self.counts(r) else None for n, r in results.items()}
        goals = self.goals(raw) if callable(self.goals) else self.goals
        notes = self.notes(raw, results) if callable(self.notes) else self.notes
        return Row(self.key, self.title, self.unit, values, notes=list(notes), goals=list(goals))


def _case(name: str) -> Callable[[dict], Results | None]:
    return lambda raw: raw.get(name)


def _no_newline_at(size: int) -> Callable[[dict], Results | None]:
    """Case (d)'s results at one output size, by subject."""

    def select(raw: dict) -> Results | None:
        if "no_newline" not in raw:
            return None
        suffix = f"@{size}"
        return {
            key.split("@")[0]: result
            for key, result in raw["no_newline"].items()
            if key.endswith(suffix)
        }

    return select


def _stall_of(kind: str) -> Callable[[dict], Results | None]:
    def select(raw: dict) -> Results | None:
        results = {
            name.split(":")[1]: result
            for name, result in raw.get("stall", {}).items()
            if name.startswith(kind + ":")
        }
        return results or None

    return select


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


def _throughput_goals(raw: dict) -> list[Goal]:
    return [at_least_ratio_under("sdk", 10, raw["emission"]["wire_mb_per_s"])]


def _throughput_notes(raw: dict, results: Results) -> list[str]:
    rate = raw["emission"]
    return [
        "execd's own ceilings: the sandbox makes the lines at "
        f"{rate['generator_mb_per_s']:.0f} MB/s (to /dev/null, timed inside); "
        f"execd puts them on the wire at {rate['wire_mb_per_s']:.1f} MB/s to a "
        f"reader that counts socket bytes and decodes nothing "
        f"({rate['wire_bytes'] / 1e6:.0f} MB of chunked events in "
        f"{rate['wire_s']:.1f} s).",
        _huge_line_gap_note(rate),
    ]


def _no_newline_notes(raw: dict, results: Results) -> list[str]:
    """The sizes and bounds of case (d), and every result of it that is left out, and why."""
    notes = [
        f"{REDUCED // workloads.MIB} MiB for all three (1 GiB would take the SDK and the built-in "
        "backend minutes and gigabytes; 64 MiB once raised RSS by 515 MB); each bounded by "
        f"{workloads.NO_NEWLINE_SECONDS:g} s and an {children.ADDRESS_SPACE_LIMIT >> 30} GiB "
        "address space."
    ]
    for key, result in raw["no_newline"].items():
        if "error" in result:
            notes.append(f"{key}: {result['error']}")
        elif not _whole(result):
            notes.append(
                f"{key} did not come back whole (exit {result.get('exit_code')}, "
                f"{result.get('retained_bytes')} bytes kept, truncated={result.get('truncated')}), "
                "so it is left out: a call that gave up early says nothing about its memory."
            )
    return notes


def _stall_notes(raw: dict, results: Results) -> list[str]:
    return [
        f"{name}: {'' if r.get('timed_out') else 'NOT '}timed_out, "
        f"{'' if r.get('sandbox_terminated') else 'NOT '}sandbox_terminated"
        if "error" not in r
        else f"{name}: {r['error']} (no result)"
        for name, r in results.items()
    ]


def _parser_alone(raw: dict) -> Results | None:
    """The parser's own rates, measured in this process: no stack, so only ours has them."""
    return {"ours": raw["parsing"]} if "parsing" in raw else None


PARSER_NOTES = [
    f"the event parser alone, fed {parsing.PARSED_BYTES // 1_000_000} MB of events in "
    "socket-sized reads, best of three; no stack, so only ours has a value."
]

ROWS = (
    RowDef(
        "a",
        "create + destroy, median of 20",
        "s",
        _case("create_destroy"),
        "median_s",
        goals=[NO_SLOWER_THAN_SDK, at_most_ratio("sdk", 0.8)],
        notes=["goal 1.05x: no slower than the SDK; 0.8x: a faster create than the SDK's."],
    ),
    RowDef(
        "b",
        "`echo hi`, median of 50",
        "s",
        _case("echo"),
        "median_s",
        goals=[NO_SLOWER_THAN_SDK, at_most(0.25, "s")],
        notes=["goal 1.05x: no slower than the SDK; 0.25 s: the result at the terminal event."],
    ),
    RowDef("c", "200 MB of lines at 50 KiB cap: wall", "s", _case("lines"), "wall_s"),
    RowDef(
        "c",
        "200 MB of lines: peak RSS delta",
        "MiB",
        _case("lines"),
        "rss_delta_mib",
        goals=[WORKER_MEMORY],
    ),
    RowDef(
        "4.4",
        "line output throughput",
        "MB/s",
        _case("lines"),
        "mb_per_s",
        goals=_throughput_goals,
        notes=_throughput_notes,
    ),
    RowDef(
        "4.4-parse",
        "parser: plain lines",
        "MB/s",
        _parser_alone,
        "plain_mb_per_s",
        notes=PARSER_NOTES,
    ),
    RowDef(
        "4.4-parse",
        "parser: minified JSON on one line",
        "MB/s",
        _parser_alone,
        "escaped_mb_per_s",
        goals=[at_least(50, "MB/s")],
    ),
    RowDef(
        "d",
        f"{REDUCED // workloads.MIB} MiB on one line: peak RSS delta",
        "MiB",
        _no_newline_at(REDUCED),
        "rss_delta_mib",
        goals=[WORKER_MEMORY],
        notes=_no_newline_notes,
        counts=_whole,
    ),
    RowDef(
        "d",
        f"{REDUCED // workloads.MIB} MiB on one line: wall",
        "s",
        _no_newline_at(REDUCED),
        "wall_s",
    ),
    RowDef(
        "d",
        f"{FULL // workloads.MIB} MiB on one line: peak RSS delta",
        "MiB",
        _no_newline_at(FULL),
        "rss_delta_mib",
        goals=[WORKER_MEMORY],
        counts=_whole,
    ),
    RowDef(
        "e",
        f"export 256 MiB: rate, median of {workloads.EXPORT_RUNS}",
        "MiB/s",
        _case("export"),
        "mb_per_s",
        goals=[at_least_ratio("sdk", 0.9)],
        notes=["sdk = files.read_bytes_stream into the same counting sink."],
    ),
    RowDef(
        "e",
        f"export 256 MiB: peak RSS delta, highest of {workloads.EXPORT_RUNS}",
        "MiB",
        _case("export"),
        "rss_delta_mib",
        goals=[WORKER_MEMORY],
    ),
    # A stall row only for the kinds that ran: the stand-in's switch does not run on a named execd.
    *(
        RowDef(f"4.3-{kind}", title, "s", _stall_of(kind), "wall_s", goals, _stall_notes)
        for kind, title, goals in (
            ("frozen", "frozen container: call returns after", [STALL_NOTICED]),
            ("silent", "silent stall: call returns after", [STALL_NOTICED]),
            (
                "heartbeat",
                "heartbeats, never ends, 20 s budget: call returns after",
                [at_most(workloads.STALL_BUDGET + 10, "s")],
            ),
            (
                workloads.DEAD_STREAM,
                "stream dead after its first frame, 2 s deadline: call returns after",
                [DEAD_STREAM_GIVEN_UP],
            ),
        )
    ),
    RowDef(
        "f",
        f"{workloads.AGENT_RUNS} concurrent agent runs: successes",
        "runs",
        _case("agents"),
        "successes",
        goals=[equals(workloads.AGENT_RUNS, "runs")],
        notes=["the SDK has no SandboxBackend, so it has no agent runs."],
    ),
    RowDef(
        "f", f"{workloads.AGENT_RUNS} concurrent agent runs: wall", "s", _case("agents"), "wall_s"
    ),
)


def _pool_part(part: str) -> Callable[[dict], Results | None]:
    """One part of case (g), as ours: the case has no other subject."""

    def select(raw: dict) -> Results | None:
        return {"ours": raw["pool"][part]} if "pool" in raw else None

    return select


POOL_ROWS = (
    RowDef(
        "g",
        f"create to first command, cold: median of {warm_pool.RUNS}",
        "s",
        _pool_part("cold"),
        "median_s",
    ),
    RowDef(
        "g",
        f"create to first command, cold: p95 of {warm_pool.RUNS}",
        "s",
        _pool_part("cold"),
        "p95_s",
    ),
    RowDef(
        "g",
        f"create to first command, from a warm pool: median of {warm_pool.RUNS}",
        "s",
        _pool_part("warm"),
        "median_s",
        goals=[at_most(0.15, "s")],
        notes=[
            "cold and warm runs alternate; the pool is kept by a keeper in a process of its own "
            "and is full at each warm run's start."
        ],
    ),
    RowDef(
        "g",
        f"create to first command, from a warm pool: p95 of {warm_pool.RUNS}",
        "s",
        _pool_part("warm"),
        "p95_s",
    ),
    RowDef(
        "g",
        "create to first command: warm median / cold median",
        "x",
        _pool_part("warm"),
        "to_cold",
        goals=[at_most(0.2, "x")],
    ),
    RowDef(
        "g",
        f"idle pool of {warm_pool.POOL_SIZE}: containers on the server",
        "containers",
        _pool_part("idle"),
        "containers",
    ),
    RowDef(
        "g",
        f"idle pool of {warm_pool.POOL_SIZE}: their memory on the server",
        "MiB",
        _pool_part("idle"),
        "container_memory_mib",
    ),
    RowDef(
        "g",
        f"idle pool of {warm_pool.POOL_SIZE}: the keeper process's RSS",
        "MiB",
        _pool_part("idle"),
        "keeper_rss_mib",
    ),
)


# The key of an executor's result that says why this machine could not run it.
UNAVAILABLE = executor_overhead.UNAVAILABLE


def _executor_part(name: str, span: str) -> Callable[[dict], Results | None]:
    """One executor's span of case (h), as ours: the case has no other subject."""

    def select(raw: dict) -> Results | None:
        if "executor" not in raw:
            return None
        result = raw["executor"].get(name, {"error": "not run"})
        if UNAVAILABLE in result:
            # What this machine cannot run now (KubernetesExecutor without the local cluster)
            # has no rows; its goal says why.
            return None
        return {"ours": result if "error" in result else result[span]}

    return select


def _executor_goals(raw: dict) -> list[Goal]:
    """From a warm pool, queued to running at most twice LocalExecutor's and at most a fifth of
    KubernetesExecutor's, at the median."""
    executors = raw["executor"]

    def median(name: str) -> float | None:
        return _value(executors.get(name, {}).get("queued_to_running"), "median_s")

    def goal(title: str, name: str, within: Callable[[float, float], bool]) -> Goal:
        theirs = median(name)
        result = executors.get(name, {})
        error = result.get(UNAVAILABLE) or result.get("error", "no result")

        def check(row: Row) -> bool | str | None:
            ours = row.values.get("ours")
            if theirs is None:
                return error
            return None if ours is None else within(ours, theirs)

        shown = "n/a" if theirs is None else f"{theirs:.2f} s"
        return Goal(f"{title} ({shown})", check)

    return [
        goal("ours <= 2x LocalExecutor's median", "local", lambda ours, it: ours <= 2 * it),
        goal("ours <= 1/5 of KubernetesExecutor's median", "kubernetes", lambda o, it: o <= it / 5),
    ]


# Case (h)'s executors, as the titles name them.
EXECUTORS = {
    "warm": "OpenSandboxExecutor from a warm pool",
    "cold": "OpenSandboxExecutor cold",
    "local": "LocalExecutor",
    "celery": "CeleryExecutor, the celery topology's workers",
    "kubernetes": "KubernetesExecutor, pods on the local cluster",
}
# The row the goals are about.
EXECUTOR_HEADLINE = ("warm", "queued_to_running", "median")
EXECUTOR_NOTE = (
    "a task that returns at once; each executor's value is in the ours column. A warm row's "
    "tries that found the pool empty were created cold: the raw results say how many took a "
    "pooled sandbox ('from_pool')."
)


def _executor_row(name: str, span: str, stat: str) -> RowDef:
    headline = (name, span, stat) == EXECUTOR_HEADLINE
    return RowDef(
        "h",
        f"{EXECUTORS[name]}: {span.replace('_', ' ')}, {stat} of {executor_overhead.RUNS}",
        "s",
        _executor_part(name, span),
        f"{stat}_s",
        goals=_executor_goals if headline else (),
        notes=[EXECUTOR_NOTE] if headline else (),
    )


EXECUTOR_ROWS = tuple(
    _executor_row(name, span, stat)
    for span in ("queued_to_running", "queued_to_success")
    for name in EXECUTORS
    for stat in ("median", "p95")
)


def build_rows(raw: dict) -> list[Row]:
    """The table for a run's raw results: a row for every case it ran."""
    built = (definition.build(raw) for definition in (*ROWS, *POOL_ROWS, *EXECUTOR_ROWS))
    return [row for row in built if row is not None]
