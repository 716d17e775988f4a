"""What a process group costs right now: its CPU time so far and its resident memory, from /proc."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class GroupUsage:
    processes: int
    cpu_seconds: float
    rss_bytes: int


def group_usage(group: int) -> GroupUsage:
    """The processes in process group ``group``, their user and system CPU time, their RSS."""
    processes, ticks, pages = 0, 0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text()
        except OSError:
            continue  # ended between the listing and the read
        # The command name in parentheses may contain spaces; the fields after it do not.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) != group:
            continue
        processes += 1
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        pages += int(statm.split()[1])  # resident
    return GroupUsage(processes, ticks / CLOCK_TICKS, pages * PAGE_BYTES)
