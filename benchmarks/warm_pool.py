"""Case (g): create to first command, cold and from a warm pool, and what an idle pool costs.

The pool lives in a Redis of this run's own and is kept by a keeper in a process of its own,
as a deployment runs one, so the keeper's work is not this process's and its memory is its own.
Cold and warm runs alternate, so the keeper refills the pool during each cold run and a slow
moment of the machine falls on both alike.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from airflow.providers.common.ai.sandbox.base import SandboxSpec

from benchmarks import workloads
from benchmarks.subjects import CONN_ID, CONNECTION_EXTRA
from dev.stack import redis
from dev.stack.state import ServerInfo
from opensandbox_provider.pool import Keeper, WarmPool, drain
from opensandbox_provider.pool._store import state_store
from opensandbox_provider.sandbox import OpenSandboxBackend

RUNS = 20
# Enough idle sandboxes that a warm run never finds the pool empty while the keeper refills.
POOL_SIZE = 3
OPEN = SandboxSpec(block_network=False)
FILL_SECONDS = 180.0


def measure(server: ServerInfo, image: str) -> dict[str, Any]:
    """The raw results of case (g): ``cold`` and ``warm`` latencies, and ``idle`` costs."""
    # The keeper's process reads the connection from the environment it inherits.
    os.environ.update(server.airflow_connection_env(CONN_ID, **CONNECTION_EXTRA))
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as directory:
        with redis.private(Path(directory)) as url:
            pool = WarmPool(
                f"bench-{uuid.uuid4().hex[:8]}",
                POOL_SIZE,
                url,
                image=image,
                spec=OPEN,
                opensandbox_conn_id=CONN_ID,
            )
            context = multiprocessing.get_context("spawn")
            stop = context.Event()
            keeper = context.Process(target=_keep, args=(pool, stop))
            keeper.start()
            try:
                _wait_full(pool)
                idle = _idle_cost(pool, keeper.pid)
                cold, warm = _first_commands(pool, image)
            finally:
                stop.set()
                keeper.join(timeout=60)
                drain(pool)
    ratio = statistics.median(warm) / statistics.median(cold)
    return {"cold": summary(cold), "warm": {**summary(warm), "to_cold": ratio}, "idle": idle}


def _keep(pool: WarmPool, stop: Any) -> None:
    # A spawned process starts with logging as it comes: quiet it as the bench's own is.
    logging.getLogger("opensandbox").setLevel(logging.ERROR)
    logging.getLogger("opensandbox_provider").setLevel(logging.WARNING)
    with Keeper(pool):
        stop.wait()


def _wait_full(pool: WarmPool) -> None:
    deadline = time.monotonic() + FILL_SECONDS
    while state_store(pool).snapshot_counters(pool.name).idle_count < pool.size:
        if time.monotonic() > deadline:
            raise RuntimeError(f"The bench's warm pool did not fill within {FILL_SECONDS:g}s.")
        time.sleep(0.2)


def _first_commands(pool: WarmPool, image: str) -> tuple[list[float], list[float]]:
    cold_backend = OpenSandboxBackend(CONN_ID, image=image)
    warm_backend = OpenSandboxBackend(CONN_ID, image=image, warm_pool=pool)
    # One unmeasured create each: the first after a server start copies execd's files out.
    for backend in (cold_backend, warm_backend):
        backend.destroy(backend.create(spec=OPEN))
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(RUNS):
        cold.append(_create_to_first_command(cold_backend))
        # A warm run starts from a full pool, as a steady deployment's does; the wait is not
        # part of the run.
        _wait_full(pool)
        warm.append(_create_to_first_command(warm_backend))
    return cold, warm


def _create_to_first_command(backend: OpenSandboxBackend) -> float:
    started = time.monotonic()
    handle = backend.create(spec=OPEN)
    try:
        outcome = backend.run_command(
            handle, workloads.ECHO_COMMAND, timeout=60, max_output_bytes=workloads.CAP
        )
        elapsed = time.monotonic() - started
        if outcome.exit_code != 0:
            raise RuntimeError(f"`{workloads.ECHO_COMMAND}` failed: exit {outcome.exit_code}.")
    finally:
        backend.destroy(handle)
    return elapsed


def _idle_cost(pool: WarmPool, keeper_pid: int | None) -> dict[str, float]:
    """What a full idle pool holds: containers and their memory on the server, the keeper's RSS."""
    sandboxes = [entry.sandbox_id for entry in state_store(pool).snapshot_idle_entries(pool.name)]
    containers: list[str] = []
    for sandbox in sandboxes:
        containers += _docker("ps", "-q", "--filter", f"label=opensandbox.io/id={sandbox}")
        containers += _docker(
            "ps", "-q", "--filter", f"label=opensandbox.io/egress-sidecar-for={sandbox}"
        )
    used = _docker("stats", "--no-stream", "--format", "{{.MemUsage}}", *containers)
    return {
        "sandboxes": len(sandboxes),
        "containers": len(containers),
        "container_memory_mib": sum(_mib(line.split("/")[0]) for line in used),
        "keeper_rss_mib": _rss_mib(keeper_pid),
    }


def _docker(*arguments: str) -> list[str]:
    output = subprocess.run(["docker", *arguments], check=True, capture_output=True, text=True)
    return output.stdout.split("\n")[:-1] if output.stdout else []


def _mib(size: str) -> float:
    size = size.strip()
    for suffix, factor in (("GiB", 1024.0), ("MiB", 1.0), ("KiB", 1 / 1024), ("B", 1 / 2**20)):
        if size.endswith(suffix):
            return float(size[: -len(suffix)]) * factor
    raise ValueError(f"docker stats printed a memory size this bench cannot read: {size!r}.")


def _rss_mib(pid: int | None) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"Process {pid} reports no resident set size.")


def summary(values: list[float]) -> dict[str, float]:
    """The median and the 95th percentile of ``values``, in seconds, and how many there were."""
    ordered = sorted(values)
    return {
        "median_s": statistics.median(values),
        # The nearest rank at or above 95%: the 19th of 20, the 29th of 30.
        "p95_s": ordered[max(0, -(-len(ordered) * 95 // 100) - 1)],
        "n": len(values),
    }
