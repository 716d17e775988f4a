"""``python -m benchmarks.runtimes`` (``make bench RUNTIME=kubernetes``): our backend on
OpenSandbox's Docker runtime and on its Kubernetes runtime, from one machine in one run.

Both runtimes' ``plain`` servers (the Docker stack's and the local cluster's, see
docs/kubernetes.rst) are measured round by round, alternating which goes first, so a slow
moment of the machine falls on both alike; what a user notices is the ratio. Every call goes
through the server's proxy, the backend's default and the way a worker reaches a pod on
Kubernetes, except one row of lines with execd reached directly. The last row is
the Kubernetes runtime's own warm start: a sandbox taken from a server ``Pool`` against a cold
create of the same pod, the two alternating so the controller refills the pool meanwhile.

With the ingress gateway on the cluster (``KUBE_INGRESS_BIN`` at ``make kube-server-up``), a
last table compares the three routes a worker can take to a pod on Kubernetes, round by
round: the server's proxy, OpenSandbox's ingress gateway and the pod's own address.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.providers.common.ai.sandbox.base import SandboxSpec

from benchmarks import use_a_deployment_of_its_own, workloads
from dev.stack.state import ServerInfo, read_state

REPO = Path(__file__).resolve().parents[1]
RUNTIMES = ("docker", "kubernetes")
OPEN = SandboxSpec(block_network=False)
CREATE_RUNS = 10
ECHO_RUNS = 30
# Smaller than the main bench's 200 MB and 256 MiB: a throughput, not a memory bound, is
# what differs between the runtimes, and the rounds are many.
LINES_BYTES = 20_000_000
LINES_COMMAND = f"yes {workloads.LINE} | head -c {LINES_BYTES}"
EXPORT_BYTES = 64 * workloads.MIB
THROUGHPUT_RUNS = 3
POOL_RUNS = 8
# The pool's pod and the cold create's sandbox alike: small, so that both fit on a two-core
# node beside the pool's idle pods.
POOL_RESOURCES = {"cpu": "250m", "memory": "256Mi"}
POOL_CAPACITY = {"bufferMin": 1, "bufferMax": 2, "poolMin": 1, "poolMax": 3}
ROUTES = ("proxy", "gateway", "direct")
# The gateway is production Kubernetes' route to a pod; the server's proxy is a single
# process relaying every byte. A chatty command's output through the gateway should run at
# least ten times the proxy's rate.
GATEWAY_GOAL = 10.0


@dataclass(frozen=True)
class Row:
    key: str
    title: str
    unit: str
    # Runtime -> samples; a runtime without the feature has none.
    samples: dict[str, list[float]]

    def median(self, runtime: str) -> float | None:
        values = self.samples.get(runtime)
        return statistics.median(values) if values else None

    def as_dict(self) -> dict[str, Any]:
        summary = {}
        for runtime, values in self.samples.items():
            summary[runtime] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "n": len(values),
            }
        return {"key": self.key, "title": self.title, "unit": self.unit, "runtimes": summary}


def render(rows: list[Row], columns: tuple[str, ...]) -> str:
    """The table: each runtime's median with its range, and the second column over the first."""
    header = ["case", *(f"{name} (median, min-max)" for name in columns), "ratio"]
    lines = [header]
    for row in rows:
        cells = [f"{row.title} [{row.unit}]"]
        for runtime in columns:
            values = row.samples.get(runtime)
            cells.append(
                f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"
                if values
                else "-"
            )
        first, second = row.median(columns[0]), row.median(columns[1])
        cells.append(f"{second / first:.2f}" if first and second is not None else "-")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines
    )


def _backend(runtime: str, server: ServerInfo, image: str, **arguments: Any):
    from opensandbox_provider.sandbox import OpenSandboxBackend

    conn_id = f"opensandbox_bench_{runtime}"
    # The backend reads its server from an Airflow connection, as in a Dag.
    os.environ.update(server.airflow_connection_env(conn_id))
    return OpenSandboxBackend(conn_id, image=image, **arguments)


def _alternating(count: int) -> Iterator[tuple[str, ...]]:
    for index in range(count):
        yield RUNTIMES if index % 2 == 0 else RUNTIMES[::-1]


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    result = call()
    return time.monotonic() - started, result


def _ran(result, what: str) -> None:
    if result.exit_code != 0:
        raise RuntimeError(f"{what} failed: exit {result.exit_code}: {result.stderr[-400:]}")


def _lines_rate(backend: Any, handle: str, runtime: str) -> float:
    """MB/s of LINES_COMMAND's output through ``backend``."""
    seconds, result = _timed(
        lambda: backend.run_command(
            handle, LINES_COMMAND, timeout=300, max_output_bytes=workloads.CAP
        )
    )
    _ran(result, f"The lines on {runtime}")
    return LINES_BYTES / 1e6 / seconds


def latencies(backends: dict[str, Any]) -> list[Row]:
    """Create to the first command's end, and create + destroy, from the same sandboxes."""
    first: dict[str, list[float]] = {name: [] for name in backends}
    whole: dict[str, list[float]] = {name: [] for name in backends}
    # One unmeasured sandbox each: a first create after a server start copies execd out.
    for backend in backends.values():
        backend.destroy(backend.create(spec=OPEN))
    for order in _alternating(CREATE_RUNS):
        for runtime in order:
            backend = backends[runtime]
            created, handle = _timed(lambda b=backend: b.create(spec=OPEN))
            ran, result = _timed(
                lambda b=backend, h=handle: b.run_command(
                    h, workloads.ECHO_COMMAND, timeout=60, max_output_bytes=workloads.CAP
                )
            )
            destroyed, _ = _timed(lambda b=backend, h=handle: b.destroy(h))
            _ran(result, f"The first command on {runtime}")
            first[runtime].append(created + ran)
            whole[runtime].append(created + destroyed)
    return [
        Row("create_destroy", "create + destroy", "s", whole),
        Row("first_command", "create to the first command's end", "s", first),
    ]


@contextmanager
def _open_sandboxes(backends: dict[str, Any]) -> Iterator[dict[str, str]]:
    handles: dict[str, str] = {}
    try:
        for runtime, backend in backends.items():
            handles[runtime] = backend.create(spec=OPEN)
        yield handles
    finally:
        for runtime, handle in handles.items():
            backends[runtime].destroy(handle)


def on_open_sandboxes(backends: dict[str, Any]) -> list[Row]:
    """``echo hi``, lines through the stream, and an export, on a sandbox each runtime keeps."""
    return _on_open_sandboxes(backends, _alternating)


def _rotating(count: int) -> Iterator[tuple[str, ...]]:
    """The routes in turn, each round starting with the next one."""
    for index in range(count):
        shift = index % len(ROUTES)
        yield ROUTES[shift:] + ROUTES[:shift]


def _on_open_sandboxes(
    backends: dict[str, Any],
    rounds: Callable[[int], Iterator[tuple[str, ...]]],
    key: str = "",
    title: str = "",
) -> list[Row]:
    """The open-sandbox rows for ``backends`` (a column each), in the orders ``rounds`` gives;
    ``key`` and ``title`` prefix the rows' own."""
    echo: dict[str, list[float]] = {name: [] for name in backends}
    lines: dict[str, list[float]] = {name: [] for name in backends}
    export: dict[str, list[float]] = {name: [] for name in backends}
    path = "/tmp/bench-runtimes-export.bin"
    with _open_sandboxes(backends) as handles:
        for order in rounds(ECHO_RUNS):
            for column in order:
                seconds, result = _timed(
                    lambda c=column: backends[c].run_command(
                        handles[c], workloads.ECHO_COMMAND, timeout=60, max_output_bytes=64
                    )
                )
                _ran(result, f"`echo hi` on {column}")
                echo[column].append(seconds * 1000)
        for column in backends:
            made = backends[column].run_command(
                handles[column],
                f"head -c {EXPORT_BYTES} /dev/urandom > {path}",
                timeout=120,
                max_output_bytes=1024,
            )
            _ran(made, f"Writing the export's file on {column}")
        for order in rounds(THROUGHPUT_RUNS):
            for column in order:
                backend, handle = backends[column], handles[column]
                lines[column].append(_lines_rate(backend, handle, column))
                with open(os.devnull, "wb") as sink:
                    seconds, written = _timed(
                        lambda b=backend, h=handle, s=sink: b.export_file(
                            h, path, s, max_bytes=2 * EXPORT_BYTES
                        )
                    )
                if written != EXPORT_BYTES:
                    raise RuntimeError(f"The export on {column} wrote {written} bytes.")
                export[column].append(EXPORT_BYTES / workloads.MIB / seconds)
    mib = EXPORT_BYTES // workloads.MIB
    return [
        Row(f"{key}echo", f"{title}`echo hi` on an open sandbox", "ms", echo),
        Row(
            f"{key}lines", f"{title}{LINES_BYTES // 1_000_000} MB of 100-byte lines", "MB/s", lines
        ),
        Row(f"{key}export", f"{title}export of {mib} MiB", "MiB/s", export),
    ]


def lines_direct(backends: dict[str, Any]) -> list[Row]:
    """The lines again with execd reached directly, not through the server's proxy: the
    server's proxy, not the runtime, bounds a chatty command's output."""
    lines: dict[str, list[float]] = {name: [] for name in backends}
    with _open_sandboxes(backends) as handles:
        for order in _alternating(THROUGHPUT_RUNS):
            for runtime in order:
                lines[runtime].append(_lines_rate(backends[runtime], handles[runtime], runtime))
    title = f"{LINES_BYTES // 1_000_000} MB of 100-byte lines, execd reached directly"
    return [Row("lines_direct", title, "MB/s", lines)]


def server_pool(server: ServerInfo) -> list[Row]:
    """Create to the first command's end on the Kubernetes runtime: cold, and from a Pool."""
    from dev.kube import pools
    from opensandbox_provider.pool import ServerPool

    stack = read_state("kubernetes")
    template = pools.pool_template(stack, resources=POOL_RESOURCES)
    samples: dict[str, list[float]] = {"cold": [], "pool": []}
    with pools.pool_on(server, template, POOL_CAPACITY) as name:
        arguments = {"cpu": POOL_RESOURCES["cpu"], "memory": POOL_RESOURCES["memory"]}
        cold = _backend("kubernetes", server, stack.sandbox_image, **arguments)
        pooled = _backend(
            "kubernetes", server, stack.sandbox_image, warm_pool=ServerPool(name), **arguments
        )
        with pools.pools_api(server) as api:
            for index in range(POOL_RUNS):
                order = ("cold", "pool") if index % 2 == 0 else ("pool", "cold")
                for kind in order:
                    if kind == "pool":
                        # Measured from an idle pod, as a pool sized for its load has one.
                        pools.wait_for(lambda: pools.idle_pods(api, name) >= 1, "an idle pod")
                    backend = pooled if kind == "pool" else cold
                    started = time.monotonic()
                    handle = backend.create(spec=OPEN)
                    try:
                        result = backend.run_command(
                            handle, workloads.ECHO_COMMAND, timeout=60, max_output_bytes=64
                        )
                        samples[kind].append(time.monotonic() - started)
                    finally:
                        backend.destroy(handle)
                    _ran(result, f"The first command ({kind})")
    return [
        Row(
            "server_pool",
            "Kubernetes: create to the first command's end, cold / from a server Pool",
            "s",
            samples,
        )
    ]


def routes(state: Any) -> list[Row]:
    """``echo hi``, lines and an export on Kubernetes through each route, alternating."""
    plain, gateway = state.servers["plain"], state.servers["gateway"]
    if plain.connection_extra.get("use_server_proxy") == "false":
        raise RuntimeError(
            "The plain server answers through the gateway (KUBE_ROUTE=gateway), so no route "
            "reaches a pod directly: run `make kube-server-up` with KUBE_ROUTE unset first."
        )
    backends = {
        "proxy": _backend("proxy", plain, state.sandbox_image, use_server_proxy=True),
        # The gateway server's connection leaves the server's proxy off (dev/kube/opensandbox.py).
        "gateway": _backend("gateway", gateway, state.sandbox_image),
        "direct": _backend("direct", plain, state.sandbox_image, use_server_proxy=False),
    }
    return _on_open_sandboxes(backends, _rotating, key="route_", title="Kubernetes: ")


def gateway_goal(rows: list[Row]) -> tuple[bool, str]:
    """Whether the gateway carried a chatty command's output ten times the proxy's rate."""
    [lines] = [row for row in rows if row.key == "route_lines"]
    gateway, proxy = lines.median("gateway"), lines.median("proxy")
    assert gateway is not None and proxy is not None
    ratio = gateway / proxy
    met = ratio >= GATEWAY_GOAL
    verdict = "met" if met else "NOT MET"
    return met, f"gateway / proxy, lines: {ratio:.1f}x (goal >= {GATEWAY_GOAL:g}x): {verdict}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.runtimes", description=__doc__)
    parser.add_argument("--json", type=Path, default=REPO / "artifacts" / "bench-runtimes.json")
    args = parser.parse_args(argv)
    use_a_deployment_of_its_own()
    # The backend logs every create and command at info; the table is what this run is for.
    logging.getLogger("opensandbox").setLevel(logging.ERROR)
    logging.getLogger("opensandbox_provider").setLevel(logging.WARNING)
    states = {runtime: read_state(runtime) for runtime in RUNTIMES}
    servers = {runtime: states[runtime].servers["plain"] for runtime in RUNTIMES}
    backends = {
        runtime: _backend(runtime, servers[runtime], states[runtime].sandbox_image)
        for runtime in RUNTIMES
    }
    started = time.monotonic()
    print("bench: create, first command and destroy, alternating runtimes ...", flush=True)
    rows = latencies(backends)
    print("bench: echo, lines and export on an open sandbox each ...", flush=True)
    rows += on_open_sandboxes(backends)
    direct = {
        runtime: _backend(
            runtime, servers[runtime], states[runtime].sandbox_image, use_server_proxy=False
        )
        for runtime in RUNTIMES
    }
    print("bench: lines again, execd reached directly ...", flush=True)
    rows += lines_direct(direct)
    print("bench: Kubernetes, cold against a server Pool ...", flush=True)
    pool_rows = server_pool(servers["kubernetes"])
    route_rows: list[Row] = []
    if "gateway" in states["kubernetes"].servers:
        print("bench: Kubernetes, the server's proxy, the gateway and direct ...", flush=True)
        route_rows = routes(states["kubernetes"])
    else:
        print("bench: no gateway on the cluster (KUBE_INGRESS_BIN unset): no route table")
    elapsed = time.monotonic() - started
    print()
    print(render(rows, RUNTIMES))
    print()
    print(render(pool_rows, ("cold", "pool")))
    met, verdict = True, ""
    if route_rows:
        print()
        print(render(route_rows, ROUTES))
        met, verdict = gateway_goal(route_rows)
        print(f"bench: {verdict}")
    print(f"\nbench: {elapsed:.0f} s in all")
    report = {
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "elapsed_s": elapsed,
        "rows": [row.as_dict() for row in rows + pool_rows + route_rows],
        "gateway_goal": verdict,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"bench: wrote {args.json}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
