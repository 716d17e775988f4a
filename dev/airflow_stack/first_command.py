"""How long a task waited from asking for its sandbox to its first command, read from its log.

The backend logs how long getting the sandbox took ("Created OpenSandbox sandbox ... in 0.57s",
or "Took from warm pool ... in 0.04s") and how long each command ran ("... exited 0 in
0.02s"); each event's timestamp is when it was logged, at the end of what it measures. So the
ask was that long before the first line, and the first command started that long before the
second.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

_GOT = re.compile(r"^(?:Created|Took from warm pool \S+) OpenSandbox sandbox .* in ([\d.]+)s\.$")
_RAN = re.compile(r" exited -?\d+ in ([\d.]+)s \(stdout ")


def first_command_seconds(log: list[dict[str, Any]]) -> tuple[str, float] | None:
    """Where the task's first sandbox came from (``cold`` or ``warm pool``) and how long its
    first command waited after the sandbox was asked for; None when the log shows neither."""
    asked: float | None = None
    source = ""
    for event in log:
        text = str(event.get("event", ""))
        if asked is None and (got := _GOT.match(text)):
            asked = _when(event) - float(got.group(1))
            source = "warm pool" if text.startswith("Took") else "cold"
        elif asked is not None and (ran := _RAN.search(text)):
            return source, _when(event) - float(ran.group(1)) - asked
    return None


def _when(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()
