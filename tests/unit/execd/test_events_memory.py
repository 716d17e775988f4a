"""The parser's memory stays bounded however much a command prints, measured in a child process.

The child measures its peak resident set across the feeding alone (``tests/peak_memory.py``),
so the high-water mark from importing Airflow cannot hide anything the parser held below it.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.peak_memory import run_child

# The default per-stream budget of the toolset.
BUDGET = 50 * 1024
# The worker-memory goal is 32 MiB; twice that leaves room for the allocator without letting a
# parser that holds a whole 1 GiB line, or any fraction of one worth having, pass.
LIMIT = 64 * 1024 * 1024

CHILD = textwrap.dedent(
    """
    import sys
    from opensandbox_provider.execd._events import EventParser
    from tests.peak_memory import peak_rss_delta, report
    from tests.unit.execd_wire import complete, frame

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

    def feed_everything():
        parser.feed(opening)
        fed = 0
        while fed < total:
            parser.feed(body)
            fed += len(body)
        parser.feed(closing + complete())

    _, delta = peak_rss_delta(feed_everything)
    report(
        delta=delta,
        kept=len(parser.stdout.text()) + len(parser.stderr.text()),
        truncated=parser.stdout.truncated or parser.stderr.truncated,
        ended=parser.ending is not None,
    )
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
    measured = run_child(CHILD, str(BUDGET), kind, str(total), timeout=600)
    assert measured["ended"]
    assert measured["truncated"]
    assert BUDGET - 4 <= measured["kept"] <= BUDGET + 1
    assert measured["delta"] < LIMIT, f"peak RSS grew by {measured['delta'] / 2**20:.1f} MiB"
