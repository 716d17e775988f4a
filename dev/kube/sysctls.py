"""The kernel settings the kubelet changes when it starts, put back by ``down``.

With ``protectKernelDefaults`` off the kubelet sets these to the values it expects; with it on
it refuses to start while they differ. Neither leaves the machine as it was, so ``up`` saves
their values before the kubelet first starts and ``down`` writes them back.
"""

from __future__ import annotations

import json
from pathlib import Path

KUBELET_TUNABLES = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
PROC_SYS = Path("/proc/sys")


def save(record: Path, proc_sys: Path = PROC_SYS) -> None:
    """Records the current values, unless a record from an earlier ``up`` is still there (then
    the kubelet may have changed them already, and the older record holds the originals)."""
    if record.exists():
        return
    values = {name: (proc_sys / name).read_text().strip() for name in KUBELET_TUNABLES}
    record.write_text(json.dumps(values, indent=2) + "\n")


def restore(record: Path, proc_sys: Path = PROC_SYS) -> dict[str, str]:
    """Writes the recorded values back and forgets them; returns the ones that had changed."""
    try:
        values = json.loads(record.read_text())
    except FileNotFoundError:
        return {}
    changed = {}
    for name, value in values.items():
        path = proc_sys / name
        if path.read_text().strip() != value:
            path.write_text(value + "\n")
            changed[name] = value
    record.unlink()
    return changed
