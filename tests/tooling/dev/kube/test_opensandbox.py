"""The Kubernetes-mode servers' configuration, and how the tests pick their runtime's servers."""

import tomllib

import pytest

from dev.kube import config, opensandbox
from dev.stack import state

# The sections of the server's example.config.k8s.toml that server_config touches.
EXAMPLE = {
    "server": {"host": "0.0.0.0", "port": 8080},
    "runtime": {"type": "kubernetes", "execd_image": "opensandbox/execd:v1.1.0"},
    "kubernetes": {
        "kubeconfig_path": "~/.kube/config",
        "namespace": "opensandbox",
        "workload_provider": "batchsandbox",
        "batchsandbox_template_file": "~/batchsandbox-template.yaml",
    },
    "store": {"type": "sqlite", "path": "~/.opensandbox/opensandbox.db"},
    "storage": {"allowed_host_paths": []},
    "egress": {"image": "opensandbox/egress:v1.1.7", "mode": "dns"},
}
IMAGES = {"sandbox": "python:3.12-slim", "execd": "execd:test", "egress": "egress:test"}
PLAIN, DNS, DNS_NFT = opensandbox.SERVERS


def test_a_server_config_is_the_example_pointed_at_the_local_cluster():
    written = opensandbox.server_config(DNS_NFT, "key", IMAGES, EXAMPLE)
    assert written["server"] == {"host": "127.0.0.1", "port": DNS_NFT.port, "api_key": "key"}
    assert written["runtime"] == {"type": "kubernetes", "execd_image": "execd:test"}
    assert written["kubernetes"]["kubeconfig_path"].endswith("/.kube/admin.kubeconfig")
    assert written["kubernetes"]["workload_provider"] == "batchsandbox"
    assert "batchsandbox_template_file" not in written["kubernetes"]
    assert written["store"]["path"].startswith(str(DNS_NFT.directory))
    assert written["egress"] == {"image": "egress:test", "mode": "dns+nft"}
    assert EXAMPLE["egress"]["mode"] == "dns"  # the example itself is left as it was


def test_the_plain_server_has_no_egress_sidecar():
    assert "egress" not in opensandbox.server_config(PLAIN, "key", IMAGES, EXAMPLE)


def test_the_servers_ports_stay_clear_of_the_docker_stacks():
    ports = [server.port for server in opensandbox.SERVERS]
    assert len(set(ports)) == len(ports)
    assert not set(ports) & {18090, 18091, 18092}


def test_a_server_config_reads_back_as_written():
    written = opensandbox.server_config(PLAIN, "key", IMAGES, EXAMPLE)
    assert tomllib.loads(config.to_toml(written)) == written


def test_runtime_kubernetes_reads_the_kubernetes_servers_state(tmp_path, monkeypatch):
    described = state.StackState(
        {"plain": state.ServerInfo("plain", "127.0.0.1", PLAIN.port, "key", None)},
        "python:3.12-slim",
        opensandbox.BRIDGE_IP,
    )
    monkeypatch.setattr(state, "SERVER_STATE_FILE", tmp_path / "stack-state.json")
    (tmp_path / "stack-state.json").write_text(described.to_json())
    monkeypatch.setenv("RUNTIME", "kubernetes")
    assert state.read_state() == described


def test_runtime_kubernetes_without_its_servers_says_how_to_start_them(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "SERVER_STATE_FILE", tmp_path / "missing.json")
    monkeypatch.setenv("RUNTIME", "kubernetes")
    with pytest.raises(RuntimeError, match="make kube-server-up"):
        state.read_state()


def test_an_unknown_runtime_is_refused(monkeypatch):
    monkeypatch.setenv("RUNTIME", "podman")
    with pytest.raises(RuntimeError, match="use docker or kubernetes"):
        state.read_state()
