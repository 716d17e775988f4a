"""What the local cluster remembers so that `down` undoes exactly what `up` did: its processes,
the shims its containerd left, the kernel settings the kubelet changes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dev.kube import mounts, network, runtime, sysctls
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


MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
51 27 254:0 /srv/repo/.kube/kubelet /srv/repo/.kube/kubelet rw,relatime shared:7 - ext4 /dev/vda rw
52 51 0:40 / /srv/repo/.kube/kubelet/pods/uid/volumes/kube-api-access rw shared:8 - tmpfs tmpfs rw
48 27 0:4 net:[4026532179] /srv/repo/.kube/containerd/state/netns/cni-1 rw - nsfs nsfs rw
60 27 0:44 / /srv/repo/.kube-other/with\\040space rw - tmpfs tmpfs rw
"""


def test_mounts_under_the_cluster_directory_are_unmounted_last_mounted_first():
    points = mounts.mounts_under(Path("/srv/repo/.kube"), MOUNTINFO)
    assert points == [
        Path("/srv/repo/.kube/containerd/state/netns/cni-1"),
        Path("/srv/repo/.kube/kubelet/pods/uid/volumes/kube-api-access"),
        Path("/srv/repo/.kube/kubelet"),
    ]


def test_a_sibling_directory_sharing_the_prefix_is_not_the_clusters():
    points = mounts.mounts_under(Path("/srv/repo/.kube-other"), MOUNTINFO)
    assert points == [Path("/srv/repo/.kube-other/with space")]
    assert not any(
        p.is_relative_to("/srv/repo/.kube-other")
        for p in mounts.mounts_under(Path("/srv/repo/.kube"), MOUNTINFO)
    )


def test_the_firewall_chains_are_removed_only_when_no_pod_has_a_rule_there():
    assert network.firewall_chains_idle(network.IDLE_FORWARD_CHAIN, network.IDLE_ADMIN_CHAIN)
    with_a_pod = [*network.IDLE_FORWARD_CHAIN, "-A CNI-FORWARD -d 10.213.0.15/32 -j ACCEPT"]
    assert not network.firewall_chains_idle(with_a_pod, network.IDLE_ADMIN_CHAIN)
    overridden = [*network.IDLE_ADMIN_CHAIN, "-A CNI-ADMIN -s 10.0.0.0/8 -j DROP"]
    assert not network.firewall_chains_idle(network.IDLE_FORWARD_CHAIN, overridden)
