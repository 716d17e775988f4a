"""The same scenarios against this backend and common-ai's built-in one, on the same stack.

Every scenario runs twice, as ``[ours]`` and ``[builtin]``, from the same Airflow connection.
Where the two behave alike the test says so with one expectation; where they differ, the
test states both outcomes and why ours differs, through :func:`differs`, which also records
the difference in the test report (``pytest -rA`` prints it), so the full list of
differences is the output of this module.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxFileTooLargeError,
    SandboxSpec,
    SandboxTerminalError,
)
from airflow.providers.common.ai.sandbox.opensandbox import OpenSandboxBackend as BuiltInBackend
from opensandbox import SandboxManagerSync

from dev.stack.resolver import ALLOWED_NAME
from dev.stack.state import ServerInfo
from opensandbox_provider.execd._execd import LIVENESS_PROBE_TIMEOUT, STALL_WINDOW
from opensandbox_provider.execd._recovery import EXECD_UNREACHABLE_BOUND
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.containers import run_frozen
from tests.markers import NEEDS_STALL_SWITCH

KINDS = {"ours": OpenSandboxBackend, "builtin": BuiltInBackend}
STALL = "OPENSANDBOX_TEST_STALL"  # the execd stand-in's test switch (dev/stack/execd/__main__.py)


@pytest.fixture(params=list(KINDS))
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def backend_for(kind: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., SandboxBackend]:
    """The backend under test, reading the one default connection, pointed at ``server``."""

    def build(server: ServerInfo, **arguments: Any) -> SandboxBackend:
        for name, value in server.airflow_connection_env("opensandbox_default").items():
            monkeypatch.setenv(name, value)
        return KINDS[kind](**arguments)

    return build


@pytest.fixture
def sandbox_for(backend_for) -> Iterator[Callable[..., tuple[SandboxBackend, str]]]:
    created: list[tuple[SandboxBackend, str]] = []

    def create(server: ServerInfo, spec: SandboxSpec | None = None, **arguments: Any):
        backend = backend_for(server, **arguments)
        handle = backend.create(spec=SandboxSpec(block_network=False) if spec is None else spec)
        created.append((backend, handle))
        return created[-1]

    yield create
    for backend, handle in created:
        backend.destroy(handle)


@pytest.fixture
def open_sandbox(sandbox_for, plain_server) -> tuple[SandboxBackend, str]:
    return sandbox_for(plain_server)


def differs(kind: str, record_property, *, ours: Any, builtin: Any, why: str) -> Any:
    """The expectation for ``kind`` in a scenario where the backends differ on purpose."""
    record_property("difference", why)
    print(f"DIFFERENCE [{kind}]: {why}")
    return ours if kind == "ours" else builtin


def run(sandbox: tuple[SandboxBackend, str], command: str, **options: Any):
    backend, handle = sandbox
    options = {"timeout": 60, "max_output_bytes": 64 * 1024, **options}
    return backend.run_command(handle, command, **options)


# --- Commands ----------------------------------------------------------------------------


def test_line_breaks_survive_byte_for_byte(open_sandbox) -> None:
    assert run(open_sandbox, "printf 'A\\n\\nB\\nC\\n'").stdout == "A\n\nB\nC\n"
    assert run(open_sandbox, "printf 'A\\n\\nB\\nC'").stdout == "A\n\nB\nC\n"


def test_exit_codes_and_streams(open_sandbox) -> None:
    result = run(open_sandbox, "echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (
        3,
        "out\n",
        "err\n",
        False,
    )


def test_each_stream_is_bounded_with_a_flag(open_sandbox) -> None:
    result = run(open_sandbox, "seq 1 20000", max_output_bytes=1000)
    assert result.stdout_truncated and result.stdout.endswith("19999\n20000\n")
    assert len(result.stdout.encode()) <= 1000


def test_a_single_long_line_is_bounded(open_sandbox, kind, record_property) -> None:
    result = run(
        open_sandbox, "head -c 16777216 /dev/zero | tr '\\0' a; echo END", max_output_bytes=100
    )
    assert result.stdout == "a" * 96 + "END\n" and result.stdout_truncated
    differs(
        kind,
        record_property,
        ours=None,
        builtin=None,
        why="The result is the same, but the built-in backend holds the whole 16 MiB line (several "
        "times over, in the SDK) before bounding it; ours reads the line as it streams and holds "
        "only the budget (tests/integration/test_worker_memory.py measures it).",
    )


def test_a_deadline_is_enforced_and_the_sandbox_survives(open_sandbox) -> None:
    run(open_sandbox, "echo kept > /srv/kept")
    result = run(open_sandbox, "sleep 60", timeout=5)
    assert (result.timed_out, result.exit_code, result.sandbox_terminated) == (True, -1, False)
    assert "signal: killed" in result.stderr
    assert run(open_sandbox, "cat /srv/kept").stdout == "kept\n"


def test_a_signal_is_not_a_timeout(open_sandbox) -> None:
    result = run(open_sandbox, "sh -c 'kill -9 $$'", timeout=30)
    assert (result.exit_code, result.timed_out) == (-1, False)


def test_a_quick_command_returns_at_its_end(open_sandbox, kind, record_property) -> None:
    run(open_sandbox, "true")  # reconnects and warm connections out of the measurement
    started = time.monotonic()
    run(open_sandbox, "echo hi")
    elapsed = time.monotonic() - started
    print(f"echo hi took {elapsed:.3f}s [{kind}]")
    differs(
        kind,
        record_property,
        ours=None,
        builtin=None,
        why="Ours returns at execd's terminal event; the built-in backend, through the SDK, reads "
        "the stream to its end, which execd holds open about a second longer. Measured here "
        f"for [{kind}]: {elapsed:.3f}s (timings are reported, not asserted).",
    )


def test_a_command_in_a_sandbox_another_instance_created(
    sandbox_for, backend_for, plain_server, kind, record_property
) -> None:
    _, handle = sandbox_for(plain_server, sandbox_timeout=60)
    other = backend_for(plain_server, sandbox_timeout=60)
    applied = other.run_command(handle, "true", timeout=3600, max_output_bytes=10).applied_timeout
    fitted = applied is not None and applied <= 60
    assert fitted == differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="A backend that reaches a sandbox by handle without holding its lease fits each "
        "command to what is left of the sandbox's life and reports it in applied_timeout; the "
        "built-in backend sends the full budget, which the sandbox's end would cut short.",
    )


def given_up_as_a_stall(
    kind, record_property, plain_server, sandbox, call: Callable[[float], Any], *, budget: float
) -> None:
    """Both backends give ``call`` up, stalled on its ``budget``, as timed out and destroy its
    sandbox; how soon differs."""
    started = time.monotonic()
    result = call(budget)
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.sandbox_terminated, result.exit_code) == (True, True, -1)
    assert not plain_server.has_sandbox(sandbox[1])
    differs(
        kind,
        record_property,
        ours=None,
        builtin=None,
        why="Both abandon the stream and destroy the sandbox. Ours notices once the stream has "
        f"been silent for {STALL_WINDOW:g} s, execd then answers no ping for "
        f"{LIVENESS_PROBE_TIMEOUT:g} s and nothing at all {EXECD_UNREACHABLE_BOUND:g} s after "
        "its last byte, whatever the budget; the built-in backend waits the budget plus 30 s. "
        f"Measured here for [{kind}] on a {budget:g} s budget: {elapsed:.1f}s.",
    )


@pytest.mark.slow
@NEEDS_STALL_SWITCH
def test_a_silent_stream(sandbox_for, plain_server, kind, record_property) -> None:
    # The stream goes silent after its first event while execd itself goes on: the command
    # runs to its end and execd keeps its status.
    sandbox = sandbox_for(plain_server, SandboxSpec(block_network=False, env={STALL: "silent"}))
    started = time.monotonic()
    result = run(sandbox, "exit 3", timeout=2)
    elapsed = time.monotonic() - started
    recovered = (result.exit_code, result.timed_out, result.sandbox_terminated) == (3, False, False)
    assert recovered == differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="Ours asks execd how a command whose stream broke ended, so the real exit code comes "
        "back and the sandbox is kept; the built-in backend gives the stream up after the "
        "budget plus 30 s, as timed out, and destroys the sandbox. "
        f"Measured here for [{kind}] on a 2 s budget: {elapsed:.1f}s.",
    )
    assert plain_server.has_sandbox(sandbox[1]) == recovered


@pytest.mark.slow
def test_a_frozen_sandbox(sandbox_for, plain_server, kind, record_property) -> None:
    # The same silence on any execd: the sandbox's container is frozen mid-command.
    sandbox = sandbox_for(plain_server)
    given_up_as_a_stall(
        kind,
        record_property,
        plain_server,
        sandbox,
        lambda budget: run_frozen(
            sandbox[1], "sleep 31", lambda: run(sandbox, "sleep 31", timeout=budget)
        ),
        budget=5,
    )


# --- Files -------------------------------------------------------------------------------


def test_files_round_trip_with_parents_created(open_sandbox) -> None:
    backend, handle = open_sandbox
    backend.write_file(handle, "/srv/a/b/c.bin", bytes(range(256)))
    assert backend.read_file(handle, "/srv/a/b/c.bin", max_bytes=256) == bytes(range(256))
    assert backend.list_directory(handle, "/srv/a") == [("b", True)]


def test_an_oversized_read_reports_the_real_size(open_sandbox) -> None:
    backend, handle = open_sandbox
    run(open_sandbox, "head -c 100000 /dev/zero > /srv/big")
    with pytest.raises(SandboxFileTooLargeError) as raised:
        backend.read_file(handle, "/srv/big", max_bytes=10)
    assert raised.value.size_bytes == 100000


def test_a_missing_path_is_recoverable(open_sandbox) -> None:
    backend, handle = open_sandbox
    with pytest.raises(SandboxError) as raised:
        backend.read_file(handle, "/no/such/file", max_bytes=10)
    assert type(raised.value) is SandboxError


def test_reading_a_directory(open_sandbox, kind, record_property) -> None:
    backend, handle = open_sandbox
    with pytest.raises(SandboxError) as raised:
        backend.read_file(handle, "/srv", max_bytes=100)
    assert type(raised.value) is differs(
        kind,
        record_property,
        ours=SandboxError,
        builtin=SandboxTerminalError,
        why="Reading a directory is a model's mistake: ours says so and points at list_directory "
        "(the model retries); the built-in backend downloads it, gets HTTP 500 and fails the task.",
    )


def test_a_listing_past_the_cap_is_refused_with_guidance(open_sandbox) -> None:
    backend, handle = open_sandbox
    run(open_sandbox, "mkdir /srv/many && cd /srv/many && seq 1 10001 | xargs touch", timeout=120)
    with pytest.raises(SandboxError, match="10000"):
        backend.list_directory(handle, "/srv/many")


def test_an_export_streams_the_file(open_sandbox) -> None:
    backend, handle = open_sandbox
    run(open_sandbox, "head -c 1000000 /dev/urandom > /srv/out.bin")
    dest = io.BytesIO()
    assert backend.export_file(handle, "/srv/out.bin", dest, max_bytes=10**9) == 1000000
    assert dest.getvalue() == backend.read_file(handle, "/srv/out.bin", max_bytes=1000000)


# --- Egress ------------------------------------------------------------------------------


def test_deny_all_without_the_sidecar(backend_for, plain_server, kind, record_property) -> None:
    with pytest.raises(SandboxTerminalError) as raised:
        backend_for(plain_server).create(spec=SandboxSpec())
    says_why = "egress.image must be configured" in str(raised.value)
    assert says_why == differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="Both refuse. Ours quotes the server's reason and says what to do; the built-in "
        "backend says only 'OpenSandbox could not create a sandbox (HTTP 400).'",
    )


def test_deny_all_behind_a_names_only_sidecar_is_refused(backend_for, dns_server) -> None:
    with pytest.raises(SandboxTerminalError, match="dns\\+nft"):
        backend_for(dns_server).create(spec=SandboxSpec())


def test_deny_all_and_an_allowlist_behind_an_address_layer_sidecar(
    sandbox_for, dns_nft_server
) -> None:
    backend, handle = sandbox_for(dns_nft_server, SandboxSpec())
    assert run((backend, handle), "echo denied-all").stdout == "denied-all\n"
    backend, handle = sandbox_for(dns_nft_server, SandboxSpec(allow_egress_to=[ALLOWED_NAME]))
    assert run((backend, handle), "echo allowlisted").stdout == "allowlisted\n"


def test_an_allowlist_given_as_a_bare_string(
    sandbox_for, dns_nft_server, kind, record_property
) -> None:
    spec = SandboxSpec(allow_egress_to=ALLOWED_NAME)  # type: ignore[arg-type]
    refused = differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="A bare string is not a list: ours refuses it; the built-in backend allows each of "
        "its letters as a host name, so the one host the author meant stays unreachable.",
    )
    if refused:
        with pytest.raises(SandboxTerminalError, match="must be a list"):
            sandbox_for(dns_nft_server, spec)
    else:
        sandbox_for(dns_nft_server, spec)


def test_address_ranges(sandbox_for, dns_nft_server, kind, record_property) -> None:
    spec = SandboxSpec(allow_egress_to_cidrs=["172.17.0.1/32"])
    accepted = differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="Ours accepts IPv4 ranges once the read-back proves the sidecar enforces them at "
        "the address layer (dns+nft); the built-in backend refuses them outright.",
    )
    if accepted:
        assert run(sandbox_for(dns_nft_server, spec), "echo ranged").stdout == "ranged\n"
    else:
        with pytest.raises(SandboxTerminalError, match="allow_egress_to_cidrs"):
            sandbox_for(dns_nft_server, spec)


def test_an_owner_for_a_task_that_attaches_later(sandbox_for, plain_server, kind, record_property):
    spec = SandboxSpec(block_network=False, owner="a_dag/a_run")
    attachable = differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="Ours records the owner as sandbox metadata, so another task can attach; the "
        "built-in backend keeps no such metadata and refuses an owner.",
    )
    if attachable:
        backend, handle = sandbox_for(plain_server, spec)
        assert backend.read_tags(handle)["airflow_owner"] == "a_dag/a_run"
    else:
        with pytest.raises(SandboxTerminalError, match="owner"):
            sandbox_for(plain_server, spec)


# --- Lifecycle and connection ------------------------------------------------------------


def test_env_metadata_and_idempotent_destroy(sandbox_for, plain_server) -> None:
    backend, handle = sandbox_for(plain_server, SandboxSpec(block_network=False, env={"X": "1"}))
    assert run((backend, handle), "echo $X").stdout == "1\n"
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        assert manager.get_sandbox_info(handle).metadata["created-by"] == "airflow"
    finally:
        manager.close()
    backend.destroy(handle)
    backend.destroy(handle)
    assert not plain_server.has_sandbox(handle)


def test_a_wrong_api_key(plain_server, monkeypatch, kind, record_property) -> None:
    connection = plain_server.airflow_connection_env("opensandbox_default")
    for name, value in connection.items():
        monkeypatch.setenv(name, value.replace(plain_server.api_key, "wrong-key-0123456789"))
    with pytest.raises(SandboxTerminalError) as raised:
        KINDS[kind]().create(spec=SandboxSpec(block_network=False))
    says_why = bool(re.search("API key", str(raised.value)))
    assert says_why == differs(
        kind,
        record_property,
        ours=True,
        builtin=False,
        why="Both fail the task on a 401. Ours says the key was refused and where to set it; the "
        "built-in backend says 'could not create a sandbox (HTTP 401)'.",
    )


def test_create_and_destroy(backend_for, plain_server, kind, record_property) -> None:
    backend = backend_for(plain_server)
    backend.destroy(backend.create(spec=SandboxSpec(block_network=False)))  # warm
    started = time.monotonic()
    backend.destroy(backend.create(spec=SandboxSpec(block_network=False)))
    elapsed = time.monotonic() - started
    differs(
        kind,
        record_property,
        ours=None,
        builtin=None,
        why="Ours polls execd's readiness itself every 25 ms instead of through the SDK, whose "
        "first miss costs a 0.5 s retry backoff. Measured here for "
        f"[{kind}]: create + destroy {elapsed:.3f}s (timings are reported, not asserted).",
    )
