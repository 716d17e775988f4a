"""A worker process of agent runs: ``python -m benchmarks.agent_runs JSON``.

The load run (:mod:`benchmarks.load`) starts several of these at once, each making
``concurrent`` scripted agent runs together, as a worker's parallel tasks would; the soak
(:mod:`benchmarks.soak`) starts one that makes runs back to back for ``seconds``. Each run's
agent writes a program into its own sandbox, runs ``command`` (the program, or something longer
that faults can land in), reads the program back and lists its folder.

The connection comes from the environment, as Airflow reads it. Everything is reported as JSON
lines on stdout, as it happens, so that a parent that has to kill this process still knows
which sandboxes to destroy: ``sandbox`` when one is made, ``command`` when a run's command
starts and ends (with its sandbox as ``handle``), ``run`` with each run's outcome, and,
after each run, ``sample`` with the process's resident memory and open file descriptors.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The clock every line carries, so the parent can line events up with the faults it made.
_CLOCK = time.time
_lock = threading.Lock()
# Where the events go: the process's stdout as it started. Airflow's logging writes to stdout
# too, from other threads, and a log line written into the middle of an event would hide it,
# so :func:`keep_stdout_for_events` sends everything else to stderr, the worker's log.
_events = sys.stdout


def keep_stdout_for_events() -> None:
    global _events
    _events = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


def emit(**fields: object) -> None:
    with _lock:
        _events.write(json.dumps({"at": _CLOCK(), **fields}) + "\n")
        _events.flush()


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmRSS line; the soak needs Linux.")


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


class _MallInfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (glibc 2.33 and later), in its order: every field a size_t.
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
        ).split()
    ]


def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    try:
        function = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None  # not glibc, or a glibc before 2.33
    function.restype = _MallInfo2
    return function


_heap_statistics = _mallinfo2()


def native_heap() -> tuple[int, int] | None:
    """
    What the C allocator holds, as (bytes in use, bytes freed but kept), or ``None``.

    RSS counts both. A native leak grows the first; memory that glibc keeps in its arenas
    after a burst of allocations on a short-lived thread grows only the second, and is
    reused rather than lost. Reading the figures changes nothing in the allocator.
    """
    if _heap_statistics is None:
        return None
    info = _heap_statistics()
    return info.uordblks + info.hblkhd, info.fordblks


def _error_chain(error: BaseException) -> list[dict]:
    """The error and what it was raised from, outermost first: an agent framework's wrapper
    says little, the backend's error under it says what happened."""
    chain, seen = [], set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append({"type": type(current).__name__, "message": str(current)[:2000]})
        current = current.__cause__ or current.__context__
    return chain


def _recording(backend, worker: str):
    """Wraps ``create`` and ``run_command`` of ``backend`` so each is reported as it happens."""
    create, run_command = backend.create, backend.run_command

    def recording_create(*args, **kwargs):
        handle = create(*args, **kwargs)
        emit(sandbox=handle, worker=worker)
        return handle

    def recording_run_command(handle, command, **kwargs):
        emit(command="started", handle=handle, worker=worker)
        try:
            result = run_command(handle, command, **kwargs)
        except BaseException as error:
            emit(command="raised", handle=handle, worker=worker, error=type(error).__name__)
            raise
        emit(
            command="ended",
            handle=handle,
            worker=worker,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            sandbox_terminated=result.sandbox_terminated,
        )
        return result

    backend.create = recording_create
    backend.run_command = recording_run_command


async def _one_run(backend, request: dict, index: int) -> None:
    from airflow.providers.common.ai.sandbox import SandboxSpec
    from airflow.providers.common.ai.toolsets import SandboxToolset

    from tests.reliability.scripted_agent import scripted_agent, succeeded

    token = f"{request['worker']}-run{index:03d}"
    command = request.get("command")
    if command:
        command = f"{command} && python3 /srv/agent/hello.py"
    toolset = SandboxToolset(
        backend,
        spec=SandboxSpec(block_network=False),
        default_command_timeout=request.get("command_timeout", 60.0),
        max_command_timeout=request.get("command_timeout", 60.0),
    )
    started = time.monotonic()
    try:
        result = await scripted_agent(token, command=command).run("Run it.", toolsets=[toolset])
    except Exception as error:  # every outcome is a data point; the parent judges it
        outcome = {"outcome": "raised", "errors": _error_chain(error)}
    else:
        answer = result.output
        outcome = {
            "outcome": "succeeded" if succeeded(answer, token) else "answered",
            "answer": answer[-2000:],
        }
    emit(run=index, worker=request["worker"], seconds=time.monotonic() - started, **outcome)


def _sample(runs_done: int) -> None:
    # Python's own allocated blocks beside RSS: when RSS climbs and they stay flat, the growth
    # is below Python (the C allocator's arenas, a native extension), not objects kept alive;
    # the C allocator's own figures then say whether that memory is in use or only kept.
    heap = native_heap()
    emit(
        sample=runs_done,
        rss=resident_bytes(),
        fds=open_descriptors(),
        threads=threading.active_count(),
        python_blocks=sys.getallocatedblocks(),
        heap_in_use=heap and heap[0],
        heap_kept_free=heap and heap[1],
    )


def _threads_for(runs: int) -> None:
    """The toolset's calls run on the loop's default executor, which has min(32, cores + 4)
    threads: on two cores six of a worker's eight runs could be in a tool call at once, and the
    others would wait for a thread, not for the sandbox. An Airflow worker process runs one
    task; this one stands for several, so each run gets threads of its own."""
    executor = ThreadPoolExecutor(max_workers=2 * runs + 4, thread_name_prefix="agent-run")
    asyncio.get_running_loop().set_default_executor(executor)


async def _batch(backend, request: dict) -> None:
    concurrent = request.get("concurrent", 1)
    _threads_for(concurrent)
    await asyncio.gather(*(_one_run(backend, request, index) for index in range(concurrent)))


async def _back_to_back(backend, request: dict) -> None:
    deadline = time.monotonic() + request["seconds"]
    index = 0
    _sample(0)
    while time.monotonic() < deadline:
        await _one_run(backend, request, index)
        index += 1
        _sample(index)


def main(request: dict) -> None:
    keep_stdout_for_events()
    # Warnings and worse, with everything else that is not an event, go to stderr: the log
    # file the parent keeps for this worker.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from opensandbox_provider.sandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(request["conn_id"], image=request["image"])
    _recording(backend, request["worker"])
    if request.get("seconds"):
        asyncio.run(_back_to_back(backend, request))
    else:
        asyncio.run(_batch(backend, request))
    emit(done=request["worker"])


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
