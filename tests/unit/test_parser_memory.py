"""The parser's memory stays bounded however much a command prints, measured in a child process.

The child samples its resident set as it feeds the parser, rather than reading its peak, whose
high-water mark from importing Airflow would hide anything the parser held below it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# The default per-stream budget of the toolset.
BUDGET = 50 * 1024
# The worker-memory goal is 32 MiB; twice that leaves room for the allocator without letting a
# parser that holds a whole 1 GiB line, or any fraction of one worth having, pass.
LIMIT = 64 * 1024 * 1024

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from opensandbox_provider.sandbox._events import EventParser
    from tests.unit.execd_wire import complete, frame

    PAGE = os.sysconf("SC_PAGE_SIZE")

    def resident():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * PAGE

    budget, kind, total = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    parser = EventParser(budget)
    chunk_size = 64 * 1024
    if kind == "one-line":
        body = b"a" * chunk_size
        opening, closing = b'{"type":"stdout","text":"', b'","timestamp":1}\\n\\n'
    elif kind == "one-line-of-nuls":
        body = b"\\\\u0000" * (chunk_size // 6)
        opening, closing = b'{"type":"stderr","text":"', b'","timestamp":1}\\n\\n'
    else:
        lines = b"".join(frame("stdout", "%06d of a line of output" % n) for n in range(2000))
        body, opening, closing = lines, b"", b""
    baseline = highest = resident()
    parser.feed(opening)
    fed = feeds = 0
    while fed < total:
        parser.feed(body)
        fed += len(body)
        feeds += 1
        if feeds % 64 == 0:
            highest = max(highest, resident())
    parser.feed(closing + complete())
    highest = max(highest, resident())
    print(json.dumps({
        "delta": highest - baseline,
        "kept": len(parser.stdout.text()) + len(parser.stderr.text()),
        "truncated": parser.stdout.truncated or parser.stderr.truncated,
        "ended": parser.ending is not None,
    }))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "total"),
    [
        ("one-line", 1024**3),  # 1 GiB without a newline: one event
        ("one-line-of-nuls", 6 * 1024**3),  # /dev/zero: 1 GiB escaped six-fold
        ("lines", 200 * 1000**2),  # 200 MB of ordinary lines
    ],
)
def test_worker_memory_stays_bounded_whatever_the_command_prints(kind: str, total: int) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(BUDGET), kind, str(total)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    measured = json.loads(child.stdout)
    assert measured["ended"]
    assert measured["truncated"]
    assert BUDGET - 4 <= measured["kept"] <= BUDGET + 1
    assert measured["delta"] < LIMIT, f"peak RSS grew by {measured['delta'] / 2**20:.1f} MiB"
