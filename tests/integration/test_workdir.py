"""A working directory: commands run there, relative file paths resolve there, attach finds it."""

from __future__ import annotations

import io

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from opensandbox_provider.sandbox import OpenSandboxBackend

WORKDIR = "/home/agent/work space"
OWNER = "workdir_dag/manual__2026-01-01T00:00:00+00:00"


@pytest.fixture
def in_workdir(sandbox_on, plain_server):
    return sandbox_on(plain_server, workdir=WORKDIR)


def test_the_working_directory_exists_once_the_sandbox_is_created(in_workdir):
    assert in_workdir.run(f"test -d '{WORKDIR}' && echo yes").stdout == "yes\n"


def test_every_command_runs_in_the_working_directory(in_workdir):
    assert in_workdir.run("pwd").stdout == f"{WORKDIR}\n"
    assert in_workdir.run("cd /tmp && pwd; pwd").stdout == "/tmp\n/tmp\n"
    # Each command starts afresh there: a cd does not carry over.
    assert in_workdir.run("pwd").stdout == f"{WORKDIR}\n"


def test_a_relative_path_written_by_the_file_tool_is_where_the_shell_finds_it(in_workdir):
    in_workdir.backend.write_file(in_workdir.handle, "notes/plan.md", b"step 1\n")

    assert in_workdir.run("cat notes/plan.md").stdout == "step 1\n"
    assert in_workdir.run(f"cat '{WORKDIR}/notes/plan.md'").stdout == "step 1\n"


def test_relative_paths_resolve_in_the_working_directory_for_every_file_tool(in_workdir):
    in_workdir.run("mkdir -p data && printf 'a,b\\n1,2\\n' > data/table.csv")
    backend, handle = in_workdir.backend, in_workdir.handle

    assert backend.read_file(handle, "data/table.csv", max_bytes=100) == b"a,b\n1,2\n"
    assert backend.read_file(handle, "./data/../data/table.csv", max_bytes=100) == b"a,b\n1,2\n"
    assert ("table.csv", False) in backend.list_directory(handle, "data")
    assert ("data", True) in backend.list_directory(handle, ".")
    exported = io.BytesIO()
    assert backend.export_file(handle, "data/table.csv", exported, max_bytes=100) == 8
    assert exported.getvalue() == b"a,b\n1,2\n"


def test_absolute_paths_are_used_as_given(in_workdir):
    in_workdir.backend.write_file(in_workdir.handle, "/tmp/elsewhere.txt", b"x\n")

    assert in_workdir.run("cat /tmp/elsewhere.txt").stdout == "x\n"
    assert in_workdir.run("test -e elsewhere.txt || echo absent").stdout == "absent\n"


def test_without_a_working_directory_relative_paths_are_the_sandboxs_own(sandbox):
    home = sandbox.run("pwd").stdout.strip()
    sandbox.backend.write_file(sandbox.handle, "plain.txt", b"p\n")

    assert sandbox.run(f"cat '{home}/plain.txt'").stdout == "p\n"


def test_an_attaching_backend_works_in_the_creators_working_directory(backend_on, plain_server):
    creator = backend_on(plain_server, workdir=WORKDIR)
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        creator.write_file(handle, "from-creator.txt", b"hello\n")
        attacher = backend_on(plain_server, workdir="/somewhere/else")

        attached = attacher.attach(handle, owner=OWNER, holder=f"{OWNER}/agent")

        assert attached.workdir == WORKDIR
        result = attacher.run_command(handle, "pwd", timeout=30, max_output_bytes=1024)
        assert result.stdout == f"{WORKDIR}\n"
        assert attacher.read_file(handle, "from-creator.txt", max_bytes=100) == b"hello\n"
        attacher.release(handle, holder=f"{OWNER}/agent")
    finally:
        creator.destroy(handle)


def test_a_backend_that_only_reconnects_finds_the_stamped_working_directory(
    backend_on, plain_server
):
    creator = backend_on(plain_server, workdir=WORKDIR)
    handle = creator.create(spec=SandboxSpec(block_network=False, owner=OWNER))
    try:
        creator.write_file(handle, "result.txt", b"done\n")

        collector = backend_on(plain_server)

        assert collector.read_file(handle, "result.txt", max_bytes=100) == b"done\n"
    finally:
        creator.destroy(handle)


def test_a_working_directory_that_already_exists_keeps_its_mode(sandbox_on, plain_server):
    sandbox = sandbox_on(plain_server, workdir="/tmp")

    assert sandbox.run("pwd; stat -c %a /tmp").stdout == "/tmp\n1777\n"


def test_a_new_working_directory_is_created_with_the_usual_mode(in_workdir):
    assert in_workdir.run(f"stat -c %a '{WORKDIR}'").stdout == "755\n"


@pytest.mark.parametrize("workdir", ["relative/dir", "", "~/work", "/with\nnewline"])
def test_a_working_directory_that_is_not_an_absolute_path_is_refused(workdir):
    with pytest.raises(ValueError, match="workdir"):
        OpenSandboxBackend(workdir=workdir)
