"""``@task.opensandbox(requirements=...)`` against the real server: the packages are installed
once, from a package index of our own on the Docker bridge, into a prepared snapshot that
later runs reuse; a changed requirement makes another; the function itself runs deny-all."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from airflow.sdk import dag, task

from dev.stack.resolver import ALLOWED_NAME
from dev.stack.state import ServerInfo, StackState
from dev.stack.wheels import wheel
from opensandbox_provider.sandbox import OpenSandboxBackend, delete_snapshot
from opensandbox_provider.sandbox._snapshots import find_snapshot, prepare_snapshot
from tests.integration.test_operator import CONN_ID, destroyed
from tests.secret_traces import giving_away, read_before_each_command

PACKAGE = "osb-probe"
MODULE = "osb_probe"
INDEX_ALLOWED = SandboxSpec(allow_egress_to=[ALLOWED_NAME])


@pytest.fixture(scope="module")
def index(stack: StackState, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """A directory of wheels served on the bridge, where ``ALLOWED_NAME`` resolves: the pip
    arguments that install from it and from nowhere else."""
    folder = tmp_path_factory.mktemp("wheels")
    for version in ("1.0", "2.0"):
        wheel(folder, PACKAGE, version, {MODULE: f"VERSION = {version!r}\n"})
    handler = partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer((stack.bridge_ip, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://{ALLOWED_NAME}:{server.server_address[1]}/"
    yield ["--no-index", "--find-links", url, "--trusted-host", ALLOWED_NAME]
    server.shutdown()
    server.server_close()


def in_a_dag(function: Any, *args: Any) -> Any:
    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        function(*args)

    return holder().task_dict[function.function.__name__]


@task.opensandbox(requirements=[f"{PACKAGE}==1.0"])
def imports_the_package(index_url: str) -> dict:
    """What it imported, and whether the index was reachable from its own sandbox."""
    import sys
    import urllib.request

    import osb_probe

    try:
        urllib.request.urlopen(index_url, timeout=5)  # noqa: S310
        reached = True
    except OSError:
        reached = False
    return {"version": osb_probe.VERSION, "python": sys.executable, "reached": reached}


def probe(version: str, pip_args: list[str]) -> Any:
    """The task above needing ``osb-probe==version``, installed from our index alone."""
    task = imports_the_package.override(
        requirements=[f"{PACKAGE}=={version}"], pip_args=pip_args, setup_spec=INDEX_ALLOWED
    )
    return in_a_dag(task, pip_args[2])


@pytest.fixture
def on_dns_nft_server(dns_nft_server: ServerInfo, monkeypatch: pytest.MonkeyPatch) -> ServerInfo:
    for name, value in dns_nft_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    return dns_nft_server


@pytest.mark.needs_snapshots
def test_requirements_are_installed_once_and_reused_and_a_change_rebuilds(
    on_dns_nft_server: ServerInfo, index: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    made: set[str] = set()
    try:
        first = probe("1.0", index)
        started = time.monotonic()
        result = first.execute({})
        first_seconds = time.monotonic() - started
        made.add(first.snapshot)
        assert result == {
            "version": "1.0",
            "python": "/opt/airflow-opensandbox-venv/bin/python",
            "reached": False,
        }
        assert destroyed(first._sandbox_id)

        caplog.clear()
        again = probe("1.0", index)
        started = time.monotonic()
        assert again.execute({})["version"] == "1.0"
        cached_seconds = time.monotonic() - started
        made.add(again.snapshot)
        assert again.snapshot == first.snapshot
        assert "Reusing snapshot" in caplog.text and "Prepared snapshot" not in caplog.text

        changed = probe("2.0", index)
        assert changed.execute({})["version"] == "2.0"
        made.add(changed.snapshot)
        assert changed.snapshot != first.snapshot
        logging.getLogger(__name__).info(
            "requirements: first run %.2fs, cached run %.2fs", first_seconds, cached_seconds
        )
        assert cached_seconds < first_seconds
    finally:
        backend = OpenSandboxBackend(CONN_ID)
        for snapshot in made:
            delete_snapshot(backend, snapshot)


@task.opensandbox(requirements=["osb-probe==9.9"], pip_args=["--no-index"])
def needs_a_missing_package() -> None:
    return None


def test_a_requirement_that_cannot_be_installed_fails_the_task_naming_the_command(
    on_dns_nft_server: ServerInfo,
) -> None:
    operator = in_a_dag(needs_a_missing_package)
    with pytest.raises(SandboxTerminalError, match="pip install") as failure:
        operator.execute({})
    assert "osb-probe==9.9" in str(failure.value)
    # Nothing was snapshotted, and no function sandbox was ever created.
    assert operator._sandbox_id is None


INDEX_URL = "http://deploy:index-password-2b7e91c4@127.0.0.1:9/simple"
REQUIREMENT = "private-tool @ http://127.0.0.1:9/private-tool.whl?token=wheel-token-6a0d38f5"
CREDENTIALS = {"index-password-2b7e91c4": INDEX_URL, "wheel-token-6a0d38f5": REQUIREMENT}


# Nothing listens on the set-up sandbox's own port 9, so pip fails at once.
@task.opensandbox(
    requirements=[REQUIREMENT],
    pip_args=["--index-url", INDEX_URL, "--retries", "0", "--timeout", "2"],
)
def needs_a_private_index() -> None:
    return None


def test_credentials_for_a_private_index_are_in_no_set_up_sandboxs_metadata_nor_its_failure(
    on_dns_nft_server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamped = read_before_each_command(monkeypatch, on_dns_nft_server)
    operator = in_a_dag(needs_a_private_index)
    with pytest.raises(SandboxTerminalError, match="pip install") as failure:
        operator.execute({})

    assert "http://deploy:***@127.0.0.1:9/simple" in str(failure.value)
    assert stamped, "the set-up ran no command"
    for secret, holding in CREDENTIALS.items():
        assert secret not in str(failure.value)
        given_away = [
            entry for metadata in stamped for entry in giving_away(metadata, secret, holding)
        ]
        assert given_away == []
    assert operator._sandbox_id is None


@pytest.mark.needs_snapshots
def test_two_runs_preparing_at_once_leave_one_snapshot_between_them(
    plain_server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    commands = [f"echo {time.time_ns()} > /opt/prepared-at"]
    backends = [OpenSandboxBackend(CONN_ID) for _ in range(2)]
    results: list[str] = []
    start = threading.Barrier(2)

    def prepare(backend: OpenSandboxBackend) -> None:
        start.wait()
        results.append(prepare_snapshot(backend, commands))

    threads = [threading.Thread(target=prepare, args=(backend,)) for backend in backends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    try:
        assert len(results) == 2 and results[0] == results[1], results
        assert _snapshots_named_as(backends[0], results[0]) == [results[0]]
    finally:
        for snapshot in set(results):
            delete_snapshot(backends[0], snapshot)


def _snapshots_named_as(backend: OpenSandboxBackend, snapshot: str) -> list[str]:
    """Every ready snapshot with the name ``snapshot`` has: one, when both runs converged."""
    from opensandbox.models.sandboxes import SnapshotFilter

    with backend._lifecycle.call("read snapshot") as api:
        name = api.get_snapshot(snapshot).name
        page = api.list_snapshots(SnapshotFilter(name=name))
    assert find_snapshot(backend._lifecycle, name) == snapshot
    return [info.id for info in page.snapshot_infos]
