"""Brings the whole stack up or down: engine, images, resolver, servers, then the state file."""

import fcntl
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from dev.stack import engine, images, nameserver, redis, servers, task_sdk_image, wheelhouse
from dev.stack.paths import LOCK_FILE
from dev.stack.resolver import DEFAULT_ZONE
from dev.stack.servers import ServerSpec
from dev.stack.state import ServerInfo, StackState, read_state, remove_state, write_state


@dataclass
class Started:
    """What one `up` started, so that `run` can stop exactly that and nothing else."""

    engine: bool = False
    resolver: bool = False
    redis: bool = False
    wheelhouse: bool = False
    servers: list[ServerSpec] = field(default_factory=list)


def up() -> Started:
    """Starts whatever part of the stack is not running; on failure, stops what it started."""
    started = Started()
    try:
        _bring_up(started)
    except BaseException:
        stop(started)
        raise
    return started


def _bring_up(started: Started) -> None:
    with _step("host packages") as note:
        note(", ".join(engine.ensure_host_packages()) or "present")
    with _step("docker engine") as note:
        started.engine = engine.ensure_engine()
        note("started" if started.engine else "answering")
        if engine.ensure_resolver_address():
            note(f"(resolver address {engine.RESOLVER_IP} added to the bridge)")
    choice = images.chosen_images()
    with _step("images") as note:
        built = images.ensure_images(choice)
        if not choice.is_named("sandbox") and task_sdk_image.ensure_task_sdk_image():
            built.append(task_sdk_image.TAG)
        note(("built or pulled " + ", ".join(built)) if built else "up to date")
        roles = (f"{role} {choice.image(role)} ({choice.kinds[role]})" for role in images.ROLES)
        note("(" + ", ".join(roles) + ")")
    with _step("server venv") as note:
        note("installed" if servers.ensure_server_venv() else "up to date")
    with _step("resolver") as note:
        started.resolver = nameserver.ensure_resolver()
        note("started" if started.resolver else "running")
    with _step("redis") as note:
        started.redis = redis.ensure_redis()
        note("started" if started.redis else "running")
    with _step("package index") as note:
        started.wheelhouse = wheelhouse.ensure_wheelhouse()
        note("started" if started.wheelhouse else "running")
    key = servers.api_key()
    with _step("servers") as note:
        launched = servers.launch_servers(key, choice)
        # A server that ran before and was only restarted is not this call's to stop later.
        started.servers = [spec for spec, was_running in launched if not was_running]
        servers.wait_healthy([spec for spec, _ in launched])
        news = [f"{'restarted' if again else 'started'} {spec.name}" for spec, again in launched]
        note(", ".join(news) or "running")
    write_state(_state(key, choice))


def restart_servers() -> None:
    for spec in servers.SERVERS:
        servers.stop_server(spec)
    up()


def down() -> None:
    stop(
        Started(
            engine=True,
            resolver=True,
            redis=True,
            wheelhouse=True,
            servers=list(servers.SERVERS),
        )
    )


def stop(started: Started) -> None:
    """Stops what ``started`` names; a process this stack did not record is never touched."""
    for spec in started.servers:
        servers.stop_server(spec)
    if not any(servers.is_running(spec) for spec in servers.SERVERS):
        remove_state()
    if started.wheelhouse:
        wheelhouse.stop_wheelhouse()
    if started.redis:
        redis.stop_redis()
    if started.resolver:
        nameserver.stop_resolver()
    if started.engine:
        engine.stop_engine()


def status() -> str:
    state = read_state("docker")
    lines = []
    for spec in servers.SERVERS:
        info = state.servers[spec.name]
        running = "up" if servers.is_running(spec) else "DOWN"
        lines += [
            f"{info.name} ({running}; egress: {info.egress_mode or 'none'})",
            f"  host: {info.host}",
            f"  port: {info.port}",
            "  schema: http",
            f"  password (API key): {info.api_key}",
        ]
        for variable, value in info.airflow_connection_env("opensandbox_default").items():
            lines.append(f"  as Airflow sees it: {variable}='{value}'")
    for role in images.ROLES:
        used_by = "the dns and dns+nft servers" if role == "egress" else "every server"
        kind = state.image_kinds[role]
        lines.append(f"{role} image: {state.images[role]} ({kind}; {used_by})")
    lines.append(f"resolver: {state.resolver['host']}:{state.resolver['port']}")
    lines.append(f"redis (warm pools): {state.redis_url or 'none'}")
    lines.append(f"package index: {' '.join(wheelhouse.pip_args())}")
    return "\n".join(lines)


@contextmanager
def lock():
    """Serialises `up`, `down` and `restart` of several shells sharing one checkout's stack."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _state(key: str, choice: images.ImageChoice) -> StackState:
    infos = {
        spec.name: ServerInfo(spec.name, servers.HOST, spec.port, key, spec.egress_mode)
        for spec in servers.SERVERS
    }
    resolver = {"host": engine.RESOLVER_IP, "port": nameserver.PORT, "zone": dict(DEFAULT_ZONE)}
    return StackState(
        infos,
        choice.image("sandbox"),
        engine.BRIDGE_IP,
        resolver,
        choice.images,
        choice.kinds,
        redis.url(),
    )


@contextmanager
def _step(name: str):
    """Times one step of `up` and prints it, so a slow start shows where the time went."""
    notes = []
    begin = time.monotonic()
    yield notes.append
    print(f"stack: {name}: {' '.join(notes)} ({time.monotonic() - begin:.1f} s)", file=sys.stderr)
