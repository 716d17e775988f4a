"""What the local cluster remembers so that `down` undoes exactly what `up` did: its processes,
the shims its containerd left, the kernel settings the kubelet changes."""

import json
import os
import subprocess
import sys
import time

import pytest

from dev.kube import runtime, sysctls
from dev.stack.processes import ProcessTable


@pytest.fixture
def table(tmp_path):
    table = ProcessTable(tmp_path / "run", tmp_path / "logs")
    yield table
    table.stop("sleeper", grace_seconds=1)


def test_a_started_process_is_found_by_name_until_it_is_stopped(table):
    record = table.start("sleeper", ["sleep", "30"])
    assert table.find("sleeper") == record and record.alive
    assert table.stop("sleeper") is True
    assert not record.alive
    assert table.find("sleeper") is None
    assert not (table.run_dir / "sleeper.json").exists()
    assert table.stop("sleeper") is False  # nothing left to stop


def test_a_record_whose_pid_now_runs_another_program_is_forgotten_not_signalled(table):
    table.run_dir.mkdir(parents=True)
    # This test's own PID, recorded with a command line it does not run: a reused PID.
    stale = {
        "name": "etcd",
        "pid": os.getpid(),
        "argv": ["etcd", "--data-dir", "x"],
        "fingerprint": "",
    }
    (table.run_dir / "etcd.json").write_text(json.dumps(stale))
    assert table.find("etcd") is None
    assert not (table.run_dir / "etcd.json").exists()
    assert table.stop("etcd") is False


def test_each_process_logs_to_its_own_file(table):
    code = "import time; print('hello from the sleeper', flush=True); time.sleep(30)"
    table.start("sleeper", [sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while not table.log_file("sleeper").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert table.stop("sleeper") is True
    assert table.log_file("sleeper").read_text() == "hello from the sleeper\n"


def test_only_shims_naming_our_containerd_socket_are_strays(tmp_path, monkeypatch):
    ours, theirs = tmp_path / "ours.sock", tmp_path / "theirs.sock"
    monkeypatch.setattr(runtime, "CONTAINERD_SOCKET", ours)
    code = "import time; time.sleep(30)"
    shims = [
        subprocess.Popen(
            ["containerd-shim-runc-v2", "-c", code, "-namespace", "k8s.io", "-address", str(s)],
            executable=sys.executable,
        )
        for s in (ours, theirs)
    ]
    try:
        assert runtime.stray_shims() == [shims[0].pid]
    finally:
        for shim in shims:
            shim.kill()
            shim.wait()


def test_the_kernel_settings_the_kubelet_changed_are_put_back(tmp_path):
    proc_sys = tmp_path / "sys"
    for name in sysctls.KUBELET_TUNABLES:
        (proc_sys / name).parent.mkdir(parents=True, exist_ok=True)
        (proc_sys / name).write_text("0\n")
    record = tmp_path / "sysctls.json"
    sysctls.save(record, proc_sys)
    (proc_sys / "kernel/panic").write_text("10\n")  # what the kubelet does
    sysctls.save(record, proc_sys)  # a second `up` must not record the kubelet's value
    assert sysctls.restore(record, proc_sys) == {"kernel/panic": "0"}
    assert (proc_sys / "kernel/panic").read_text() == "0\n"
    assert not record.exists()
    assert sysctls.restore(record, proc_sys) == {}
