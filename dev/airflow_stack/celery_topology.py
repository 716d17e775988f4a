"""The celery topology: Airflow spread over hosts the way a distributed deployment is.

On this host, in the root network namespace: the api-server, the scheduler and the
dag-processor, the PostgreSQL metadata database (:mod:`dev.airflow_stack.postgres`), the Redis
broker (:mod:`dev.airflow_stack.broker`) and a forward to the OpenSandbox servers
(:mod:`dev.airflow_stack.forward`), all listening on the bridge's address. Two Celery workers
and two triggerers each run on a host of their own: a network namespace on the bridge, with its
own address and name (:mod:`dev.airflow_stack.network`), so a task's host in the UI is the
worker that ran it. Every process is started and stopped by PID, like the local topology's.
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from celery import Celery

from dev.airflow_stack import components, network, postgres
from dev.airflow_stack import forward as forward_module
from dev.airflow_stack.broker import Broker
from dev.airflow_stack.executor_site import executor_settings
from dev.airflow_stack.home import AirflowSite, any_free_port, kept_secret
from dev.airflow_stack.postgres import MetadataDatabase
from dev.stack import engine
from dev.stack.servers import SERVERS
from dev.stack.state import ServerInfo

WORKERS = 2
TRIGGERERS = 2
# Task slots per worker. Each running task is a supervisor and a task process (about 150 MB
# together); four per worker keep two workers' share of a two-core machine reasonable.
CONCURRENCY = 4
ROOT_COMPONENTS = ("api-server", "scheduler", "dag-processor")
# Workers at .11 and up, triggerers at .21 and up: an address tells the role.
WORKER_HOSTS = network.numbered("worker", WORKERS, 11)
TRIGGERER_HOSTS = network.numbered("triggerer", TRIGGERERS, 21)
WORKER_NAMES = tuple(host.name for host in WORKER_HOSTS)
# "api-forward" runs only beside the OpenSandboxExecutor (see CeleryTopology.start).
SERVICES = ("postgres", "redis", "forward", "api-forward")
AIRFLOW_COMPONENTS = (
    *ROOT_COMPONENTS,
    *(host.name for host in TRIGGERER_HOSTS),
    *WORKER_NAMES,
)
# The programs the topology runs besides PostgreSQL's, by the Debian package that has them.
HOST_PACKAGES = {
    "redis-server": "redis-server",
    "ip": "iproute2",
    "nft": "nftables",
    "unshare": "util-linux",
}
HEARTBEAT_TIMEOUT_SECONDS = 60
TRIGGERER_HEALTH_SECONDS = 20
TRIGGERER_NAMES = tuple(host.name for host in TRIGGERER_HOSTS)
# Measured: both workers answer a ping about 10 s after launch on a two-core machine.
WORKER_READY_TIMEOUT = 180.0


def _worker_command(host: network.RemoteHost) -> list[str]:
    worker = [sys.executable, "-m", "airflow", "celery", "worker"]
    return [*worker, "--celery-hostname", f"celery@{host.name}", "--concurrency", str(CONCURRENCY)]


@dataclass(frozen=True)
class CeleryTopology:
    database: MetadataDatabase
    broker: Broker
    # Ports of servers besides the stack's that the hosts reach through the forward: a test's
    # own server, which it may stop.
    extra_server_ports: tuple[int, ...] = ()
    # The api-server's port, when the OpenSandboxExecutor's sandboxes must reach its execution
    # API.
    execution_api_port: int | None = None
    components: tuple[str, ...] = (*AIRFLOW_COMPONENTS, *SERVICES)

    def start(self, site: AirflowSite) -> None:
        _ensure_host_packages()
        hosts_file = network.create(site.home, [*TRIGGERER_HOSTS, *WORKER_HOSTS])
        # Run as a script: it needs only the standard library, and the home is no place to
        # import this repository from.
        forward = [sys.executable, forward_module.__file__, network.BRIDGE_IP]
        ports = [str(port) for port in (*(spec.port for spec in SERVERS), *self.extra_server_ports)]
        environment = site.environment()
        components.launch(site.home, "forward", [*forward, "127.0.0.1", *ports], environment)
        if self.execution_api_port is not None:
            # The executor's sandboxes reach the execution API on the Docker bridge, by the
            # stack resolver's allowed name; the api-server listens on this topology's bridge,
            # which drops what comes from elsewhere.
            to_api = [sys.executable, forward_module.__file__, engine.BRIDGE_IP, network.BRIDGE_IP]
            command = [*to_api, str(self.execution_api_port)]
            components.launch(site.home, "api-forward", command, environment)
        self.database.start(f"{network.SUBNET_PREFIX}.0/{network.PREFIX_LENGTH}")
        self.broker.start()
        components.migrate(site)
        for name in ROOT_COMPONENTS:
            argv = [sys.executable, "-m", "airflow", name]
            components.launch(site.home, name, network.command(hosts_file, argv), environment)
        for host in TRIGGERER_HOSTS:
            self.start_triggerer(site, host.name)
        for host in WORKER_HOSTS:
            self._launch_worker(site, host)
        self._wait_for_workers(site.home, WORKER_NAMES)

    def _launch_worker(self, site: AirflowSite, host: network.RemoteHost) -> None:
        argv = network.command(network.hosts_file(site.home), _worker_command(host), host)
        # Celery refuses to run as root unless told that it is meant to.
        components.launch(site.home, host.name, argv, site.environment() | {"C_FORCE_ROOT": "1"})

    def _wait_for_workers(self, home: Path, names: tuple[str, ...]) -> None:
        app = Celery(broker=self.broker.url)
        wanted = {f"celery@{name}" for name in names}
        deadline = time.monotonic() + WORKER_READY_TIMEOUT
        try:
            while True:
                answered = {name for reply in app.control.ping(timeout=1.0) for name in reply}
                if wanted <= answered:
                    return
                dead = components.dead(home, names)
                if dead or time.monotonic() > deadline:
                    tails = "\n\n".join(
                        f"--- {name} ---\n{components.log_tail(home, name)}"
                        for name in dead or sorted(wanted - answered)
                    )
                    raise RuntimeError(
                        f"Celery workers {sorted(wanted - answered)} did not answer a ping "
                        f"within {WORKER_READY_TIMEOUT:.0f}s:\n{tails}"
                    )
                time.sleep(0.5)
        finally:
            app.close()

    def stop(self, home: Path) -> None:
        stop(home)

    def reach(self, server: ServerInfo) -> ServerInfo:
        return dataclasses.replace(server, host=network.BRIDGE_IP)

    def kill_worker(self, name: str) -> list[int]:
        """SIGKILL every process on the worker ``name``'s host, the worker and the tasks it
        runs, at once: the host is gone. Returns their PIDs."""
        return network.kill_processes(_host(WORKER_HOSTS, name).namespace)

    def restart_worker(self, site: AirflowSite, name: str) -> None:
        """Start the worker ``name`` again on its host after ``kill_worker``; wait for it."""
        self._launch_worker(site, _host(WORKER_HOSTS, name))
        self._wait_for_workers(site.home, (name,))

    def kill_triggerer(self, name: str) -> list[int]:
        """SIGKILL every process on the triggerer ``name``'s host at once; returns their PIDs."""
        return network.kill_processes(_host(TRIGGERER_HOSTS, name).namespace)

    def start_triggerer(self, site: AirflowSite, name: str) -> None:
        """Start the triggerer ``name`` on its host, at start-up and after ``kill_triggerer``."""
        host = _host(TRIGGERER_HOSTS, name)
        argv = [sys.executable, "-m", "airflow", "triggerer"]
        command = network.command(network.hosts_file(site.home), argv, host)
        components.launch(site.home, host.name, command, site.environment())


def _host(hosts: tuple[network.RemoteHost, ...], name: str) -> network.RemoteHost:
    return next(host for host in hosts if host.name == name)


def stop(home: Path) -> None:
    """Stop the celery topology started in ``home`` and remove its network, if it runs."""
    components.stop(home, AIRFLOW_COMPONENTS)
    # The database and the broker outlive their clients, so no client's last write is lost.
    components.stop(home, SERVICES)
    network.remove(home)


def _ensure_host_packages() -> None:
    # Debian keeps PostgreSQL's programs off PATH, under a directory named for its version.
    missing = {pkg for prog, pkg in HOST_PACKAGES.items() if not shutil.which(prog)}
    missing |= set() if postgres.programs() else {"postgresql"}
    engine.install_debian_packages(sorted(missing))


def prepare(
    home: Path,
    *,
    port: int | None = None,
    extra_dags: Sequence[Path] = (),
    extra_server_ports: Sequence[int] = (),
    executor_on: ServerInfo | None = None,
    executor_conn_id: str | None = None,
) -> tuple[AirflowSite, CeleryTopology]:
    """The site in ``home`` configured for the celery topology, and the topology to start;
    with ``executor_on``, the OpenSandboxExecutor beside CeleryExecutor, its tries on that
    server through the connection ``executor_conn_id`` (then required)."""
    if executor_on is not None and executor_conn_id is None:
        raise ValueError("The executor's server needs the id of the connection it is made as.")
    site = AirflowSite.prepare(home, port=port, extra_dags=extra_dags)
    (home / "run").mkdir(exist_ok=True)
    # Hex, so that the passwords go into URLs as they are.
    database = MetadataDatabase(
        home,
        network.BRIDGE_IP,
        any_free_port(),
        kept_secret(home / "postgres-password", lambda: secrets.token_hex(16)),
    )
    broker = Broker(
        home,
        network.BRIDGE_IP,
        any_free_port(),
        kept_secret(home / "redis-password", lambda: secrets.token_hex(16)),
    )
    settings = {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(WORKERS * CONCURRENCY),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database.sqlalchemy_url,
        "AIRFLOW__CELERY__BROKER_URL": broker.url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + database.sqlalchemy_url,
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CONCURRENCY),
        # A lost host's tasks stop heartbeating (every 5 s while they run); the default 300 s
        # before the scheduler fails them, and retries them elsewhere, is long for a demo.
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_SECONDS),
        # A triggerer that stops heartbeating (every 5 s) loses its triggers to the other one
        # after this long; Airflow's default is 30 s.
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(TRIGGERER_HEALTH_SECONDS),
    }
    site = dataclasses.replace(site, host=network.BRIDGE_IP, settings=settings)
    if executor_on is None:
        return site, CeleryTopology(database, broker, tuple(extra_server_ports))
    assert executor_conn_id is not None  # checked above, before anything was made
    beside = executor_settings(
        site, executor_on, conn_id=executor_conn_id, default_executor="CeleryExecutor"
    )
    site = dataclasses.replace(site, settings={**settings, **beside})
    return site, CeleryTopology(
        database, broker, tuple(extra_server_ports), execution_api_port=site.port
    )
