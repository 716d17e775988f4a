"""Files through execd's own file APIs, not shell pipelines (SPEC 9)."""

from __future__ import annotations

import io

import pytest
from airflow.providers.common.ai.sandbox.base import (
    SandboxError,
    SandboxFileTooLargeError,
    SandboxTerminalError,
)

from opensandbox_provider.sandbox.backend import MAX_LIST_ENTRIES

EVERY_BYTE = bytes(range(256)) * 4


def test_a_write_creates_its_parent_directories_and_reads_back_byte_for_byte(sandbox) -> None:
    sandbox.backend.write_file(sandbox.handle, "/srv/deep/er/still/data.bin", EVERY_BYTE)
    assert (
        sandbox.backend.read_file(sandbox.handle, "/srv/deep/er/still/data.bin", max_bytes=4096)
        == EVERY_BYTE
    )
    assert sandbox.run("stat -c %s /srv/deep/er/still/data.bin").stdout == "1024\n"


def test_a_relative_path_resolves_where_commands_run(sandbox) -> None:
    sandbox.backend.write_file(sandbox.handle, "relative/note.txt", b"here\n")
    assert sandbox.run("cat relative/note.txt").stdout == "here\n"
    assert (
        sandbox.backend.read_file(sandbox.handle, "relative/note.txt", max_bytes=100) == b"here\n"
    )


def test_a_write_replaces_what_was_there(sandbox) -> None:
    sandbox.backend.write_file(sandbox.handle, "/srv/f", b"a much longer first version\n")
    sandbox.backend.write_file(sandbox.handle, "/srv/f", b"short\n")
    assert sandbox.backend.read_file(sandbox.handle, "/srv/f", max_bytes=100) == b"short\n"


def test_an_oversized_read_reports_the_files_real_size_without_transferring_it(sandbox) -> None:
    sandbox.run("head -c 10485760 /dev/zero > /srv/big")
    with pytest.raises(SandboxFileTooLargeError) as raised:
        sandbox.backend.read_file(sandbox.handle, "/srv/big", max_bytes=1000)
    assert (raised.value.size_bytes, raised.value.max_bytes) == (10485760, 1000)


def test_an_oversized_read_through_a_symlink_reports_the_targets_real_size(sandbox) -> None:
    sandbox.run("head -c 5000 /dev/zero > /srv/target && ln -s target /srv/link")
    with pytest.raises(SandboxFileTooLargeError) as raised:
        sandbox.backend.read_file(sandbox.handle, "/srv/link", max_bytes=100)
    assert (raised.value.size_bytes, raised.value.max_bytes) == (5000, 100)
    assert sandbox.backend.read_file(sandbox.handle, "/srv/link", max_bytes=5000) == bytes(5000)
    dest = io.BytesIO()
    assert sandbox.backend.export_file(sandbox.handle, "/srv/link", dest, max_bytes=5000) == 5000
    assert dest.getvalue() == bytes(5000)


# What each link points to, and what the contract says about reading that.
LINKS = {
    "to-directory": ("/srv", "is a directory"),
    "to-fifo": ("/srv/fifo", "not a regular file"),
    "to-device": ("/dev/zero", "not a regular file"),
}


@pytest.mark.parametrize("operation", ["read", "export"])
def test_a_symlink_is_judged_by_what_it_points_to(sandbox, operation: str) -> None:
    links = " && ".join(f"ln -s {target} /srv/{name}" for name, (target, _) in LINKS.items())
    sandbox.run(f"mkfifo /srv/fifo && {links}")
    for name, (_, refusal) in LINKS.items():
        with pytest.raises(SandboxError, match=refusal) as raised:
            if operation == "read":
                sandbox.backend.read_file(sandbox.handle, f"/srv/{name}", max_bytes=100)
            else:
                sandbox.backend.export_file(
                    sandbox.handle, f"/srv/{name}", io.BytesIO(), max_bytes=100
                )
        # Refused as the mistake it is: not a file too large to read, not the sandbox's end.
        assert type(raised.value) is SandboxError, f"{name}: {raised.value!r}"


def test_a_file_of_exactly_the_budget_is_read_whole(sandbox) -> None:
    sandbox.backend.write_file(sandbox.handle, "/srv/exact", b"x" * 100)
    assert sandbox.backend.read_file(sandbox.handle, "/srv/exact", max_bytes=100) == b"x" * 100


def test_an_empty_file_reads_as_empty(sandbox) -> None:
    sandbox.run("touch /srv/empty")
    assert sandbox.backend.read_file(sandbox.handle, "/srv/empty", max_bytes=10) == b""


@pytest.mark.parametrize("operation", ["read", "list", "export"])
def test_a_missing_path_is_a_mistake_the_model_can_fix(sandbox, operation: str) -> None:
    with pytest.raises(SandboxError) as raised:
        if operation == "read":
            sandbox.backend.read_file(sandbox.handle, "/no/such/path", max_bytes=10)
        elif operation == "list":
            sandbox.backend.list_directory(sandbox.handle, "/no/such/path")
        else:
            sandbox.backend.export_file(sandbox.handle, "/no/such/path", io.BytesIO(), max_bytes=10)
    assert type(raised.value) is SandboxError
    assert "/no/such/path" in str(raised.value)


def test_reading_a_directory_points_at_listing_it(sandbox) -> None:
    with pytest.raises(SandboxError, match="list_directory"):
        sandbox.backend.read_file(sandbox.handle, "/srv", max_bytes=10)


def test_listing_a_file_is_a_mistake_the_model_can_fix(sandbox) -> None:
    sandbox.run("touch /srv/plain")
    with pytest.raises(SandboxError, match="not a directory"):
        sandbox.backend.list_directory(sandbox.handle, "/srv/plain")


def test_a_listing_names_entries_and_marks_directories(sandbox) -> None:
    sandbox.run(
        "mkdir -p /srv/l/sub && touch /srv/l/a.txt '/srv/l/with space' && ln -s a.txt /srv/l/link"
    )
    assert sorted(sandbox.backend.list_directory(sandbox.handle, "/srv/l")) == [
        ("a.txt", False),
        ("link", False),
        ("sub", True),
        ("with space", False),
    ]


def test_a_listing_past_the_cap_tells_the_model_to_narrow_it(sandbox) -> None:
    sandbox.run(
        f"mkdir /srv/many && cd /srv/many && seq 1 {MAX_LIST_ENTRIES + 1} | xargs touch",
        timeout=120,
    )
    with pytest.raises(SandboxError, match=f"more than {MAX_LIST_ENTRIES} entries") as raised:
        sandbox.backend.list_directory(sandbox.handle, "/srv/many")
    assert "List a subdirectory" in str(raised.value)
    sandbox.run("rm /srv/many/1")
    assert len(sandbox.backend.list_directory(sandbox.handle, "/srv/many")) == MAX_LIST_ENTRIES


def test_an_export_streams_the_file_out_whole(sandbox) -> None:
    sandbox.run("head -c 3000000 /dev/urandom > /srv/export.bin")
    expected = sandbox.backend.read_file(sandbox.handle, "/srv/export.bin", max_bytes=3000000)
    dest = io.BytesIO()
    written = sandbox.backend.export_file(sandbox.handle, "/srv/export.bin", dest, max_bytes=10**9)
    assert written == 3000000
    assert dest.getvalue() == expected


def test_an_oversized_export_is_refused_with_the_real_size(sandbox) -> None:
    sandbox.run("head -c 5000 /dev/zero > /srv/export-big")
    dest = io.BytesIO()
    with pytest.raises(SandboxFileTooLargeError) as raised:
        sandbox.backend.export_file(sandbox.handle, "/srv/export-big", dest, max_bytes=4999)
    assert raised.value.size_bytes == 5000
    assert dest.getvalue() == b""


def test_exporting_a_directory_is_refused(sandbox) -> None:
    with pytest.raises(SandboxError, match="is a directory"):
        sandbox.backend.export_file(sandbox.handle, "/srv", io.BytesIO(), max_bytes=100)


def test_an_export_of_a_file_still_being_written_is_refused(sandbox) -> None:
    # A process left running in the sandbox keeps appending, so the copy cannot match the
    # size the file had when the export began. It runs in a session of its own, and the
    # command waits until the file is growing: execd kills a command's process group once its
    # shell exits, and a writer that had not yet left it then (a loaded machine is slow to)
    # was killed with it, which left a file that no longer changed (seen in CI).
    started = sandbox.run(
        "(setsid sh -c 'while true; do head -c 65536 /dev/zero; done > /srv/growing' "
        ">/dev/null 2>&1 </dev/null &) && size() { stat -c %s /srv/growing 2>/dev/null || "
        'echo 0; } && first=$(size) && until [ "$(size)" -gt "$first" ]; do sleep 0.05; done'
    )
    assert started.exit_code == 0, started.stderr
    with pytest.raises(SandboxError, match="changed while it was exported|over the"):
        sandbox.backend.export_file(sandbox.handle, "/srv/growing", io.BytesIO(), max_bytes=10**9)


class TruncatingOnFirstWrite(io.BytesIO):
    """An export destination that, once the first bytes arrive, has the sandbox cut the file."""

    def __init__(self, cut) -> None:
        super().__init__()
        self._cut = cut

    def write(self, data) -> int:
        if self._cut is not None:
            cut, self._cut = self._cut, None
            cut()
        return super().write(data)


@pytest.mark.parametrize("use_server_proxy", [False, True], ids=["direct", "through-server"])
def test_a_file_that_shrinks_while_it_is_exported_is_a_mistake_not_the_end(
    sandbox_on, plain_server, use_server_proxy: bool
) -> None:
    # Cut short, the body ends early on either route (execd closes the connection, as the
    # conformance tests pin); a body that went silent instead would end by the read timeout.
    sandbox = sandbox_on(plain_server, use_server_proxy=use_server_proxy)
    # Far more than the socket buffers between execd and the worker hold, so most of it is
    # still unread when the file is cut.
    sandbox.run("head -c 134217728 /dev/zero > /srv/shrinking")
    dest = TruncatingOnFirstWrite(lambda: sandbox.run("truncate -s 1000 /srv/shrinking"))

    with pytest.raises(SandboxError, match="changed while it was exported") as raised:
        sandbox.backend.export_file(sandbox.handle, "/srv/shrinking", dest, max_bytes=10**9)

    assert not isinstance(raised.value, SandboxTerminalError)
    assert sandbox.run("stat -c %s /srv/shrinking").stdout == "1000\n"


def test_file_operations_on_a_sandbox_that_is_gone_are_terminal(
    sandbox, backend_on, plain_server
) -> None:
    sandbox.backend.write_file(sandbox.handle, "/srv/f", b"x")
    stale = backend_on(plain_server)
    stale.run_command(sandbox.handle, "true", timeout=10, max_output_bytes=10)  # reconnected
    sandbox.backend.destroy(sandbox.handle)
    with pytest.raises(SandboxTerminalError, match="no longer exists"):
        stale.read_file(sandbox.handle, "/srv/f", max_bytes=10)
    with pytest.raises(SandboxTerminalError):
        stale.run_command(sandbox.handle, "true", timeout=10, max_output_bytes=10)
