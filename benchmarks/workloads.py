"""What each case asks of the sandbox: commands, sizes and budgets, in one place."""

MIB = 1024 * 1024
# The toolset's default per-stream cap, which is what a worker holds per command in practice.
CAP = 50 * 1024
# Budget for commands that are meant to finish; a stuck one must not hold the bench for long.
LONG_TIMEOUT = 600.0

CREATE_DESTROY_RUNS = 20
ECHO_RUNS = 50
ECHO_COMMAND = "echo hi"

# 200 MB of 100-byte lines: 2 million output events, the shape of a chatty build log.
LINE = "x" * 99
LINES_BYTES = 200_000_000
LINES_COMMAND = f"yes {LINE} | head -c {LINES_BYTES}"

# 1 GiB on one line, a model-written `cat /dev/zero`: the case the worker-memory goal is for.
NO_NEWLINE_BYTES = 1024 * MIB
# The raw SDK and the built-in backend hold a whole line in memory several times over and take
# about a second per MiB on it (measured: 64 MiB raised RSS by 515 MB in 62 s), so 1 GiB would
# take the worker down or run for a quarter of an hour. All three are measured at this size,
# bounded by NO_NEWLINE_SECONDS, and ours alone at 1 GiB as well.
NO_NEWLINE_REDUCED_BYTES = 64 * MIB
NO_NEWLINE_SECONDS = 240.0
# The execd stand-in, like execd, holds an unfinished line in memory until it ends, and several
# copies of it while it encodes the event; a 1 GiB line needs a sandbox with room for that. The
# worker's memory is what is measured, not the sandbox's.
NO_NEWLINE_SANDBOX_MEMORY = "8Gi"


def no_newline_command(size: int) -> str:
    return f"head -c {size} /dev/zero | tr '\\0' x"


EXPORT_BYTES = 256 * MIB
# Exports of the same file, back to back: the median rate, and the highest peak RSS.
EXPORT_RUNS = 5
EXPORT_PATH = "/srv/bench-export.bin"
MAKE_EXPORT_FILE = f"head -c {EXPORT_BYTES} /dev/urandom > {EXPORT_PATH}"

AGENT_RUNS = 16
AGENT_SECONDS = 300.0

# A command that would print and end at once, were the stream not stalled by the stand-in.
STALLED_COMMAND = "echo started; sleep 1; echo done"
# Longer than the heartbeat window, so a stall caught inside it was caught by the heartbeat and
# not by the command's own budget.
STALL_BUDGET = 20.0
# The raw SDK waits on a silent stream forever; this is how long the bench lets it.
STALL_SECONDS = 90.0

# Emission rates of the stand-in itself, for the throughput row: how fast the sandbox makes the
# lines, and how fast execd puts them on the wire to a reader that parses nothing.
GENERATOR_COMMAND = (
    'python3 -c "import subprocess,time; t=time.monotonic(); '
    f"subprocess.run('{LINES_COMMAND} > /dev/null', shell=True, check=True); "
    'print(time.monotonic()-t)"'
)


# A real stall, on any execd: the sandbox's container is frozen while this runs.
FROZEN_COMMAND = "sleep 61; echo done"
FROZEN_MARKER = "sleep 61"


# A stream dead after its first frame, past a 2 s deadline: execd has killed the command, so
# the silence can only be a dead stream (the stand-in's silent switch; on the real execd
# tests/reliability/test_network_faults.py makes it with nftables).
DEAD_STREAM_DEADLINE = 2.0
DEAD_STREAM_COMMAND = "sleep 30"
DEAD_STREAM = "dead-past-deadline"


def stall_kinds(execd_is_named: bool) -> tuple[str, ...]:
    """ "frozen" runs on any execd; the others need the stand-in's switch."""
    return ("frozen",) if execd_is_named else ("frozen", "silent", "heartbeat", DEAD_STREAM)


def stall_env(kind: str) -> dict[str, str]:
    """The execd stand-in's test switch (its header documents it): "silent" or "heartbeat"."""
    return {"OPENSANDBOX_TEST_STALL": "silent" if kind == DEAD_STREAM else kind}


def stalled_command(kind: str) -> tuple[str, float]:
    """The command a stall of ``kind`` runs, and its budget."""
    if kind == "frozen":
        return FROZEN_COMMAND, STALL_BUDGET
    if kind == DEAD_STREAM:
        return DEAD_STREAM_COMMAND, DEAD_STREAM_DEADLINE
    return STALLED_COMMAND, STALL_BUDGET
