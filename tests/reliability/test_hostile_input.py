"""Paths and bytes a model may produce, on purpose or not, against our backend on the real stack.

What is right for each: a path is the sandbox's own business, so spaces, newlines and ``..``
work as they would in the sandbox's shell, and a symlink resolves inside the sandbox, never on
the worker. A path no filesystem can hold (a NUL byte) is the model's mistake, so it is a
``SandboxError`` it can correct, never a terminal error and never a crash. Bytes that are not
UTF-8 come back as text without failing the call.
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
import socket

import pytest
from airflow.providers.common.ai.sandbox import SandboxError, SandboxTerminalError

from tests.containers import assert_no_container
from tests.reliability.conftest import OPEN, assert_key_hidden

BASE = "/srv/hostile"
CAP = 50 * 1024
BIG_WRITE = 100 * 1024 * 1024


@pytest.fixture
def sandbox(make_backend, plain_server, sandboxes):
    backend = make_backend(plain_server)
    handle = backend.create(spec=OPEN)
    sandboxes.append(handle)
    yield backend, handle
    backend.destroy(handle)
    assert_no_container(handle)


def _run(backend, handle: str, command: str):
    """A short command of the test's own in the sandbox, to look at what a call did."""
    return backend.run_command(handle, command, timeout=30, max_output_bytes=CAP)


def _prepare(backend, handle: str, command: str) -> None:
    """Set the sandbox up with a short command of the test's own, which must succeed."""
    made = _run(backend, handle, command)
    assert made.exit_code == 0, made.stderr


def _export(backend, handle: str, path: str) -> bytes:
    sink = io.BytesIO()
    backend.export_file(handle, path, sink, max_bytes=1 << 30)
    return sink.getvalue()


@pytest.mark.parametrize(
    ("directory", "name"),
    [
        ("with spaces", "a file name.txt"),
        ("new\nline", "line\nbreak.txt"),
        ("quote's", 'double"quote $(touch pwned) `x`.txt'),
    ],
    ids=["spaces", "newlines", "shell-metacharacters"],
)
def test_awkward_path_survives_write_read_list_and_export(sandbox, directory, name):
    backend, handle = sandbox
    path = f"{BASE}/{directory}/{name}"
    content = f"content of {name!r}\n".encode()

    backend.write_file(handle, path, content)

    assert backend.read_file(handle, path, max_bytes=CAP) == content
    assert (name, False) in backend.list_directory(handle, f"{BASE}/{directory}")
    assert _export(backend, handle, path) == content
    pwned = _run(backend, handle, "find / -xdev -maxdepth 4 -name pwned 2>/dev/null | wc -l")
    assert pwned.stdout.strip() == "0", "a file name was run as a shell command"


def test_dot_dot_resolves_inside_the_sandbox(sandbox):
    backend, handle = sandbox
    # The kernel resolves "sub/.." only through a "sub" that exists: execd creates a path's
    # lexical parents, never "sub" itself (docs/execd-wire.rst, wire-upload).
    _prepare(backend, handle, f"mkdir -p {BASE}/sub")
    backend.write_file(handle, f"{BASE}/sub/../dotdot.txt", b"up one")

    assert backend.read_file(handle, f"{BASE}/dotdot.txt", max_bytes=CAP) == b"up one"
    assert (
        backend.read_file(handle, f"{BASE}/sub/../../hostile/dotdot.txt", max_bytes=CAP)
        == b"up one"
    )
    hosts = backend.read_file(handle, f"{BASE}/../../../../../../etc/hostname", max_bytes=CAP)
    sandbox_hostname = _run(backend, handle, "cat /etc/hostname")
    assert hosts.decode() == sandbox_hostname.stdout


def test_symlink_pointing_outside_resolves_in_the_sandbox_never_on_the_worker(sandbox, tmp_path):
    backend, handle = sandbox
    secret = tmp_path / "worker-only-secret.txt"
    secret.write_text("the worker's own file")
    link = f"{BASE}/escape"
    _prepare(
        backend,
        handle,
        f"mkdir -p {BASE} && ln -s {shlex.quote(str(secret))} {link}"
        f" && ln -s /etc/hostname {BASE}/host",
    )

    with pytest.raises(SandboxError) as read_error:
        backend.read_file(handle, link, max_bytes=CAP)
    with pytest.raises(SandboxError) as export_error:
        _export(backend, handle, link)
    assert not isinstance(read_error.value, SandboxTerminalError)
    assert not isinstance(export_error.value, SandboxTerminalError)
    assert "the worker's own file" not in str(read_error.value) + str(export_error.value)

    inside = backend.read_file(handle, f"{BASE}/host", max_bytes=CAP).decode().strip()
    assert inside != socket.gethostname()
    assert inside == _run(backend, handle, "hostname").stdout.strip()


@pytest.mark.parametrize(
    "operation",
    ["write_file", "read_file", "list_directory", "export_file"],
)
def test_nul_byte_in_a_path_is_a_mistake_the_model_can_correct(
    sandbox, operation, caplog, plain_server
):
    backend, handle = sandbox
    path = f"{BASE}/nul\0byte.txt"
    calls = {
        "write_file": lambda: backend.write_file(handle, path, b"x"),
        "read_file": lambda: backend.read_file(handle, path, max_bytes=CAP),
        "list_directory": lambda: backend.list_directory(handle, path),
        "export_file": lambda: _export(backend, handle, path),
    }

    with pytest.raises(SandboxError) as error:
        calls[operation]()

    assert not isinstance(error.value, SandboxTerminalError)
    still_usable = _run(backend, handle, "echo alive")
    assert still_usable.stdout == "alive\n"
    assert_key_hidden(plain_server.api_key, caplog, error.value)


def test_a_100_mb_write_arrives_whole(sandbox):
    backend, handle = sandbox
    content = os.urandom(BIG_WRITE)
    path = f"{BASE}/big.bin"

    backend.write_file(handle, path, content)

    check = backend.run_command(
        handle, f"stat -c %s {path} && sha256sum {path}", timeout=120, max_output_bytes=CAP
    )
    size, digest = check.stdout.split()[:2]
    assert int(size) == BIG_WRITE
    assert digest == hashlib.sha256(content).hexdigest()


def test_output_that_is_not_utf8_comes_back_as_text(sandbox):
    backend, handle = sandbox
    result = backend.run_command(
        handle,
        # The random bytes first: only the tail of a stream over the cap is kept.
        r"head -c 200000 /dev/urandom; printf '\n\xff\xfebad\n'; printf 'err\xc3\n' >&2",
        timeout=60,
        max_output_bytes=CAP,
    )

    assert result.exit_code == 0
    assert "bad" in result.stdout
    assert "err" in result.stderr
    assert len(result.stdout.encode()) <= CAP + 4096, "the cap did not hold on binary output"


def test_file_names_and_contents_that_are_not_utf8_do_not_break_the_file_tools(sandbox):
    backend, handle = sandbox
    names = f"{BASE}/names"
    _prepare(
        backend,
        handle,
        f"mkdir -p {names} && touch {names}/plain.txt"
        f" && printf 'latin' > {names}/$(printf 'caf\\351').txt",
    )
    raw = b"\xff\xfe\x00binary\x80"
    backend.write_file(handle, f"{names}/raw.bin", raw)

    listing = backend.list_directory(handle, names)

    assert len(listing) == 3
    assert ("plain.txt", False) in listing
    assert backend.read_file(handle, f"{names}/raw.bin", max_bytes=CAP) == raw
    odd = next(name for name, _ in listing if name.startswith("caf"))
    try:
        assert backend.read_file(handle, f"{names}/{odd}", max_bytes=CAP) == b"latin"
    except SandboxError as error:
        # The name came back through JSON, where execd replaces the byte that is not UTF-8; a
        # name that no longer matches the file is then a path the model can correct.
        assert not isinstance(error, SandboxTerminalError)
