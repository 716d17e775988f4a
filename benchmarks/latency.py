"""Cases (a) and (b): latencies, measured in this process with the subjects interleaved.

Each round visits every subject once, starting one place further along the list than the round
before, so a slow moment of the machine falls on every subject alike and no subject always
runs right after the same other one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from benchmarks import workloads
from benchmarks.subjects import Subject


def _rounds(subjects: Sequence[Subject], count: int):
    for round_index in range(count):
        shift = round_index % len(subjects)
        yield list(subjects[shift:]) + list(subjects[:shift])


def create_destroy(subjects: Sequence[Subject]) -> dict[str, dict]:
    # One unmeasured pair each: the first create after a server start copies execd's files out.
    for subject in subjects:
        subject.destroy(subject.create())
    samples: dict[str, list[float]] = {subject.name: [] for subject in subjects}
    for order in _rounds(subjects, workloads.CREATE_DESTROY_RUNS):
        for subject in order:
            started = time.monotonic()
            subject.destroy(subject.create())
            samples[subject.name].append(time.monotonic() - started)
    return {name: _summary(values) for name, values in samples.items()}


def echo(subjects: Sequence[Subject]) -> dict[str, dict]:
    handles = {}
    try:
        for subject in subjects:
            handles[subject.name] = subject.create()
        samples: dict[str, list[float]] = {subject.name: [] for subject in subjects}
        for order in _rounds(subjects, workloads.ECHO_RUNS):
            for subject in order:
                started = time.monotonic()
                outcome = subject.run(
                    handles[subject.name],
                    workloads.ECHO_COMMAND,
                    timeout=60,
                    max_output_bytes=workloads.CAP,
                )
                samples[subject.name].append(time.monotonic() - started)
                if outcome.exit_code != 0:
                    raise RuntimeError(
                        f"`echo hi` failed on {subject.name}: exit {outcome.exit_code}."
                    )
    finally:
        for subject in subjects:
            if subject.name in handles:
                subject.destroy(handles[subject.name])
    return {name: _summary(values) for name, values in samples.items()}


def _summary(values: list[float]) -> dict:
    return {
        "median_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
        "n": len(values),
    }
