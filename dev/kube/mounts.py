"""Mounts left under the cluster's directory after its processes stopped.

The kubelet bind-mounts its root directory onto itself (to share mount events with containers)
and leaves that mount behind when it exits; a pod it could not stop leaves its volumes. None of
them may outlive ``down``, or the directory can be neither removed nor reused cleanly.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")


def mounts_under(directory: Path, mountinfo: str) -> list[Path]:
    """Mount points at or below ``directory``, deepest (most recently mounted) first."""
    points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        # The kernel writes a space in a path as \040; the mount point is the fifth field.
        point = Path(fields[4].replace("\\040", " "))
        if point == directory or point.is_relative_to(directory):
            points.append(point)
    return list(reversed(points))


def unmount_under(directory: Path) -> list[Path]:
    """Unmounts everything at or below ``directory``; returns what was unmounted."""
    points = mounts_under(directory.resolve(), MOUNTINFO.read_text())
    for point in points:
        subprocess.run(["umount", str(point)], check=True, capture_output=True)
    return points
