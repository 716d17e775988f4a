"""
A guest that kills execd and answers on its port itself, with a compression bomb (a megabyte
that inflates to a gigabyte) or a byte a second, costs the worker and the triggerer a stated
bound of memory and time, and the task ends with a clear error; another task's trigger on the
same triggerer keeps its renewals and its deadline meanwhile.

The guest really is in the sandbox: ``tests/hostile_answers.py``, run there beside
``tests/integration/execd_recorder.py``, finds whatever listens on execd's port, kills it and
binds the port, so this holds the same on our stand-in and on the real execd. Each side runs in
a child process of its own, whose peak resident memory is measured (``tests/peak_memory.py``).

Measured on the local stack with the real execd, two shared cores, against the bound of
:data:`MEMORY_BOUND` (64 MiB): the worker's read and command add 7.7 MiB under either answer,
the drip's read ending at its 5 s allowance in 5.6 s; the triggerer adds 19 MiB, the hostile
trigger's error event comes 5.1-5.5 s in, and the other trigger renews its sandbox every
0.8-1.2 s (a 1 s interval) and ends at its 12 s deadline in 12.1 s. The file runs in about 60 s.
"""

from __future__ import annotations

import os
import shlex
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from opensandbox_provider.execd._background import output_paths, separated
from tests import hostile_answers
from tests.integration import execd_recorder
from tests.peak_memory import MIB, run_child
from tests.reliability.conftest import OPEN

EXECD_PORT = 44772
GUEST = "/tmp/hostile"
# What reading a guest's answers may add to a process, worker or triggerer: a cap's worth of
# body and the allocator's room, against the gigabyte the bomb inflates to.
MEMORY_BOUND = 64 * MIB
# The connection's request timeout here: every call's whole-call deadline.
REQUEST_TIMEOUT = 3.0
# A file read's whole-call deadline in the worker here (MIN_EXPORT_ALLOWANCE in production).
READ_ALLOWANCE = 5.0
# How long a trigger polls a sandbox that answers nothing usable before its error event.
UNREACHABLE_GRACE = 5.0
# The other task's trigger: renewed this often, and its task's deadline this far off.
RENEWAL_INTERVAL = 1.0
OTHER_DEADLINE = 12.0
# What a loaded machine (two cores, several test runs) may add to any of those.
SLACK = 3.0

WORKER = textwrap.dedent(
    """
    import sys, time
    from opensandbox_provider.sandbox import OpenSandboxBackend
    from tests.peak_memory import peak_rss_delta, report

    from opensandbox_provider.sandbox import _limits

    conn_id, sandbox = sys.argv[1], sys.argv[2]
    # A file read's whole-call deadline, two minutes at least in production, cut short here.
    _limits.MIN_EXPORT_ALLOWANCE = float(sys.argv[3])
    backend = OpenSandboxBackend(conn_id)

    def attempt(call):
        started = time.monotonic()
        try:
            call()
            said = "no error"
        except Exception as e:
            said = f"{type(e).__name__}: {e}"
        return {"said": said, "took": time.monotonic() - started}

    def worker():
        return {
            "read": attempt(lambda: backend.read_file(sandbox, "/etc/hostname", max_bytes=1024)),
            "command": attempt(
                lambda: backend.run_command(sandbox, "echo hi", timeout=10, max_output_bytes=1024)
            ),
        }

    calls, added = peak_rss_delta(worker)
    report(calls=calls, added=added)
    """
)

TRIGGERER = textwrap.dedent(
    """
    import asyncio, sys, time
    from opensandbox_provider.triggers import opensandbox as triggers
    from tests.peak_memory import peak_rss_delta, report

    conn_id, grace, renew_every, other_deadline = sys.argv[1], *map(float, sys.argv[2:5])
    (hostile, hostile_id, hostile_out, hostile_err), (other, other_id, other_out, other_err) = (
        sys.argv[5:9], sys.argv[9:13]
    )
    # Renewals as often as the test can watch them on the server.
    triggers.renewal_interval = lambda lease: renew_every
    triggers.OpenSandboxCommandTrigger.unreachable_grace = grace

    def trigger(sandbox, command_id, stdout, stderr, **deadlines):
        return triggers.OpenSandboxCommandTrigger(
            sandbox=sandbox, command_id=command_id, opensandbox_conn_id=conn_id,
            command_timeout=600.0, sandbox_timeout=600.0,
            output_paths={"stdout": stdout, "stderr": stderr}, poll_interval=0.5, **deadlines,
        )

    async def first_event(made, started):
        async for event in made.run():
            return {**event.payload, "after": time.monotonic() - started}

    async def triggerer():
        started = time.monotonic()
        return await asyncio.gather(
            first_event(trigger(hostile, hostile_id, hostile_out, hostile_err), started),
            first_event(
                trigger(other, other_id, other_out, other_err,
                        task_deadline_at=time.time() + other_deadline),
                started,
            ),
        )

    (hostile_event, other_event), added = peak_rss_delta(lambda: asyncio.run(triggerer()))
    report(hostile=hostile_event, other=other_event, added=added)
    """
)


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """The bomb, made once: in the sandbox it would cost seconds of CPU per test."""
    path = tmp_path_factory.mktemp("hostile") / "bomb.gz"
    path.write_bytes(hostile_answers.compression_bomb())
    return path


@pytest.fixture
def on_the_stack(make_backend, plain_server, sandboxes) -> Callable[[], tuple[object, str]]:
    """A backend on a connection whose calls end by REQUEST_TIMEOUT, and sandboxes made by it."""
    backend = make_backend(plain_server, "hostile_execd", request_timeout=REQUEST_TIMEOUT)

    def sandbox() -> tuple[object, str]:
        made = backend.create(spec=OPEN)
        sandboxes.append(made)
        return backend, made

    return sandbox


def in_the_background(backend, sandbox: str, command: str) -> tuple[str, dict[str, str]]:
    """Start ``command`` as the operator does, its output to files: its id and those files."""
    paths = output_paths()
    for path in paths.values():
        backend.write_file(sandbox, path, b"")
    return backend.start_command(sandbox, separated(command, paths), timeout=600), paths


def take_over(backend, sandbox: str, mode: str, bomb: Path) -> None:
    """The guest's command: replace execd with answers in ``mode``; back once they answer."""
    for source in (hostile_answers.__file__, execd_recorder.__file__):
        backend.write_file(sandbox, f"{GUEST}/{Path(source).name}", Path(source).read_bytes())
    backend.write_file(sandbox, f"{GUEST}/bomb.gz", bomb.read_bytes())
    guest = shlex.join(
        ["python3", f"{GUEST}/hostile_answers.py", str(EXECD_PORT), mode, f"{GUEST}/bomb.gz"]
    )
    started = backend.run_command(
        sandbox,
        f"(setsid {guest} > {GUEST}/log 2>&1 < /dev/null &)",
        timeout=30,
        max_output_bytes=1024,
    )
    assert started.exit_code == 0, started.stderr
    url, headers = backend.execd_endpoint(sandbox)
    deadline = time.monotonic() + 30
    while not answered_by_the_guest(url, headers):
        assert time.monotonic() < deadline, "the guest did not take execd's port within 30 s"
        time.sleep(0.5)


def answered_by_the_guest(url: str, headers: dict[str, str]) -> bool:
    """Whether execd's port answers with the guest's server now."""
    try:
        with httpx.stream("GET", f"{url}/ping", headers=headers, timeout=5) as response:
            return hostile_answers.GUEST_HEADER in response.headers
    except httpx.HTTPError:
        return False


class Expiries:
    """A sandbox's ``expires_at`` as the server states it, read every 0.2 s on a thread."""

    def __init__(self, server, sandbox: str) -> None:
        from opensandbox.sync.manager import SandboxManagerSync

        self._manager = SandboxManagerSync.create(server.connection_config())
        self._sandbox = sandbox
        self._stop = threading.Event()
        # (monotonic time, expires_at) first, then at each change of the expiry.
        self.changes: list[tuple[float, object]] = []
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            expires_at = self._manager.get_sandbox_info(self._sandbox).expires_at
            if not self.changes or self.changes[-1][1] != expires_at:
                self.changes.append((time.monotonic(), expires_at))

    def __enter__(self) -> Expiries:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._manager.close()

    def gaps(self) -> list[float]:
        """Seconds between one renewal the server saw and the next."""
        # The first reading is the expiry before any renewal.
        times = [at for at, _ in self.changes[1:]]
        return [later - earlier for earlier, later in zip(times, times[1:], strict=False)]


@pytest.fixture(params=["bomb", "drip"])
def mode(request) -> str:
    return request.param


def test_a_worker_meets_a_guest_answering_for_execd_with_a_clear_error_in_bounded_memory(
    on_the_stack, bomb, mode
) -> None:
    backend, sandbox = on_the_stack()
    take_over(backend, sandbox, mode, bomb)
    measured = run_child(
        WORKER, "hostile_execd", sandbox, str(READ_ALLOWANCE), timeout=120, env=dict(os.environ)
    )
    calls = measured["calls"]
    print(
        f"worker, {mode}: {measured['added'] / MIB:.1f} MiB added; read ended after "
        f"{calls['read']['took']:.1f} s, command after {calls['command']['took']:.1f} s"
    )
    assert measured["added"] < MEMORY_BOUND, measured
    for call in calls.values():
        assert "\n" not in call["said"], calls
    # Whatever the guest sends, its answer to a command is not an event stream.
    assert "rather than an event stream" in calls["command"]["said"], calls
    if mode == "bomb":
        assert "in a form this backend reads: its answer ran past" in calls["read"]["said"], calls
    else:
        # The read ends by its whole-call deadline, long before the drip would.
        assert f"after the {READ_ALLOWANCE:g}s allowed" in calls["read"]["said"], calls
        assert calls["read"]["took"] < READ_ALLOWANCE + SLACK, calls


def test_a_triggerer_keeps_other_tasks_renewals_and_deadlines_while_a_guest_answers_for_execd(
    on_the_stack, plain_server, bomb, mode
) -> None:
    backend, hostile = on_the_stack()
    _, other = on_the_stack()
    hostile_id, hostile_paths = in_the_background(backend, hostile, "sleep 600")
    other_id, other_paths = in_the_background(backend, other, "sleep 600")
    take_over(backend, hostile, mode, bomb)

    with Expiries(plain_server, other) as expiries:
        measured = run_child(
            TRIGGERER,
            "hostile_execd",
            *map(str, (UNREACHABLE_GRACE, RENEWAL_INTERVAL, OTHER_DEADLINE)),
            hostile,
            hostile_id,
            *hostile_paths.values(),
            other,
            other_id,
            *other_paths.values(),
            timeout=120,
            env=dict(os.environ),
        )
    hostile_event, other_event, gaps = measured["hostile"], measured["other"], expiries.gaps()
    print(
        f"triggerer, {mode}: {measured['added'] / MIB:.1f} MiB added; the hostile trigger's "
        f"error after {hostile_event['after']:.1f} s; the other's timeout after "
        f"{other_event['after']:.1f} s; renewed {len(gaps) + 1} times, "
        f"{min(gaps):.1f}-{max(gaps):.1f} s apart"
    )
    assert measured["added"] < MEMORY_BOUND, measured
    # The hostile sandbox ends as a sandbox that could not be polled, after the grace and at
    # most one call's deadline more.
    assert hostile_event["status"] == "error", hostile_event
    assert f"could not be polled for {UNREACHABLE_GRACE:g}s" in hostile_event["message"]
    assert hostile_event["after"] < UNREACHABLE_GRACE + REQUEST_TIMEOUT + SLACK, hostile_event
    # The other task's trigger ends at its deadline, renewed on its pace all along.
    assert other_event["status"] == "timeout", other_event
    assert OTHER_DEADLINE <= other_event["after"] < OTHER_DEADLINE + SLACK, other_event
    assert len(gaps) >= OTHER_DEADLINE / RENEWAL_INTERVAL / 2, expiries.changes
    assert max(gaps) < RENEWAL_INTERVAL + SLACK, gaps
