"""The local cluster's snapshot registry: its configuration, containerd's view of it, and the
controller's flags, all absent unless the committer's image is named."""

import ipaddress
import json
import tomllib
from pathlib import Path

from dev.kube import config, network, opensandbox, snapshots

STATE = Path("/srv/cluster/containerd")
CRI = "io.containerd.grpc.v1.cri"
COMMITTER = "opensandbox-real/image-committer:test"


def test_the_registry_listens_only_on_this_hosts_pod_bridge_address(tmp_path):
    written = snapshots.registry_config(tmp_path / "data")
    host, port = written["http"]["addr"].rsplit(":", 1)
    assert host == network.gateway_ip()
    assert ipaddress.ip_address(host) in ipaddress.ip_network(network.POD_CIDR)
    assert int(port) == snapshots.PORT
    assert written["storage"]["filesystem"]["rootdirectory"] == str(tmp_path / "data")


def test_containerd_pulls_from_the_registry_over_plain_http():
    hosts = tomllib.loads(config.to_toml(snapshots.hosts_toml()))
    assert hosts == {"server": f"http://{snapshots.ADDRESS}"}


def test_the_hosts_file_lies_where_containerd_looks_for_the_registrys_address(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(snapshots, "DATA_DIR", tmp_path / "registry")
    monkeypatch.setattr(snapshots, "CONFIG_FILE", tmp_path / "registry.json")
    monkeypatch.setattr(snapshots, "HOSTS_DIR", tmp_path / "certs.d")
    snapshots.write_configuration()
    hosts = tmp_path / "certs.d" / f"{network.gateway_ip()}:{snapshots.PORT}" / "hosts.toml"
    assert tomllib.loads(hosts.read_text()) == snapshots.hosts_toml()
    written = json.loads((tmp_path / "registry.json").read_text())
    assert written == snapshots.registry_config(tmp_path / "registry")
    assert (tmp_path / "registry").is_dir()


def test_containerd_reads_registry_hosts_only_when_given_a_folder_for_them():
    cni = (Path("/srv/cni/net.d"), Path("/usr/lib/cni"))
    plain = config.containerd_config(STATE, *cni)
    assert "registry" not in plain["plugins"][CRI]
    table = config.containerd_config(STATE, *cni, Path("/srv/certs.d"))
    assert table["plugins"][CRI]["registry"] == {"config_path": "/srv/certs.d"}
    assert tomllib.loads(config.to_toml(table)) == table


def test_without_the_committers_image_the_controller_runs_as_before(monkeypatch):
    monkeypatch.delenv(snapshots.COMMITTER_VARIABLE, raising=False)
    assert snapshots.committer_image() is None
    monkeypatch.setenv(snapshots.COMMITTER_VARIABLE, "")
    assert snapshots.committer_image() is None
    argv = opensandbox.controller_argv(Path("/opt/controller"), None)
    assert not [arg for arg in argv if "snapshot" in arg or "committer" in arg]


def test_with_the_committers_image_the_controller_pushes_to_the_local_registry(monkeypatch):
    monkeypatch.setenv(snapshots.COMMITTER_VARIABLE, COMMITTER)
    argv = opensandbox.controller_argv(Path("/opt/controller"), snapshots.committer_image())
    assert argv[: len(opensandbox.controller_argv(Path("/opt/controller"), None))] == (
        opensandbox.controller_argv(Path("/opt/controller"), None)
    )
    assert f"--snapshot-registry={snapshots.ADDRESS}/snapshots" in argv
    assert "--snapshot-registry-insecure" in argv
    assert f"--image-committer-image={COMMITTER}" in argv
