"""The local cluster's configuration: containerd's TOML, the CNI network, the node's address,
the pause image archive."""

import hashlib
import io
import ipaddress
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from dev.kube import config, network, pause

STATE = Path("/srv/cluster/containerd")


def test_containerd_toml_reads_back_as_the_configuration_it_was_written_from():
    table = config.containerd_config(STATE, Path("/srv/cni/net.d"), Path("/usr/lib/cni"))
    assert tomllib.loads(config.to_toml(table)) == table


def test_our_containerd_keeps_every_path_under_its_own_state_directory():
    table = config.containerd_config(STATE, Path("/srv/cni/net.d"), Path("/usr/lib/cni"))
    cri = table["plugins"]["io.containerd.grpc.v1.cri"]
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    paths = [
        table["root"],
        table["state"],
        table["grpc"]["address"],
        table["ttrpc"]["address"],
        table["plugins"]["io.containerd.internal.v1.opt"]["path"],
        runc["Root"],
    ]
    assert all(Path(p).is_relative_to(STATE) for p in paths), paths
    assert cri["sandbox_image"] == config.PAUSE_IMAGE
    assert cri["stream_server_address"] == "127.0.0.1"
    assert table["debug"]["address"] == table["metrics"]["address"] == ""


def test_toml_strings_are_escaped():
    text = config.to_toml({"a": {"b.c": {"path": 'quote " and \\ backslash'}}})
    assert tomllib.loads(text) == {"a": {"b.c": {"path": 'quote " and \\ backslash'}}}


def test_toml_refuses_what_containerd_config_never_holds():
    with pytest.raises(TypeError, match="not float"):
        config.to_toml({"ratio": 0.5})


def test_the_cni_bridge_is_our_own_and_serves_the_pod_range(tmp_path):
    conflist = network.cni_conflist(tmp_path / "ipam")
    bridge = conflist["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["bridge"] == network.BRIDGE != "docker0"
    assert bridge["ipMasq"] is False
    (pod_range,) = bridge["ipam"]["ranges"][0]
    assert pod_range["subnet"] == network.POD_CIDR
    # No pod is ever given the address of the pods' resolver.
    last, resolver = (ipaddress.ip_address(a) for a in (pod_range["rangeEnd"], network.RESOLVER_IP))
    assert resolver in ipaddress.ip_network(network.POD_CIDR) and last < resolver
    assert bridge["ipam"]["dataDir"] == str(tmp_path / "ipam")
    assert [plugin["type"] for plugin in conflist["plugins"]] == ["bridge", "firewall"]


def test_the_node_address_is_that_of_the_default_route_interface():
    routes = [{"dst": "default", "gateway": "192.0.2.1", "dev": "eth0"}]
    addresses = [
        {"ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.0.2.2", "prefixlen": 24}]}
    ]
    assert network.node_ip(routes, addresses) == "192.0.2.2"


def test_a_machine_without_a_default_route_is_told_so():
    with pytest.raises(RuntimeError, match="no default IPv4 route"):
        network.node_ip([], [])


def test_a_route_overlapping_the_pod_range_stops_the_cluster():
    with pytest.raises(RuntimeError, match="overlaps the cluster's range"):
        network.check_free([{"dst": "10.213.0.0/16", "dev": "br-other"}])


def test_docker_routes_default_route_and_our_own_bridge_are_no_clash():
    network.check_free(
        [
            {"dst": "default", "dev": "eth0"},
            {"dst": "172.17.0.0/16", "dev": "docker0"},
            {"dst": "192.0.2.0/24", "dev": "eth0"},
            {"dst": network.POD_CIDR, "dev": network.BRIDGE},
        ]
    )


def test_the_service_address_is_the_first_of_the_service_range():
    assert network.service_ip() == "10.214.0.1"
    assert network.gateway_ip() == "10.213.0.1"


def test_kubeconfig_names_the_loopback_apiserver_and_the_certificate_files():
    kubeconfig = config.kubeconfig(Path("ca.crt"), Path("a.crt"), Path("a.key"), "someone")
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert kubeconfig["users"][0]["user"] == {"client-certificate": "a.crt", "client-key": "a.key"}
    assert kubeconfig["contexts"][0]["context"]["user"] == "someone"


def test_the_kubelet_never_collects_imported_images_and_refuses_anonymous_calls():
    kubelet = config.kubelet_config(
        Path("/pki"), Path("/run/c.sock"), "192.0.2.2", Path("/kube/pod-resolv.conf")
    )
    assert kubelet["imageGCHighThresholdPercent"] == 100
    # Pods resolve through the file the cluster writes, never the machine's own resolver.
    assert kubelet["resolvConf"] == "/kube/pod-resolv.conf"
    assert config.resolv_conf("10.213.0.1") == "nameserver 10.213.0.1\n"
    assert kubelet["authentication"]["anonymous"]["enabled"] is False
    assert kubelet["readOnlyPort"] == 0
    assert kubelet["containerRuntimeEndpoint"] == "unix:///run/c.sock"


def _members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {member.name: member for member in tar.getmembers()}


def _read(archive: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return tar.extractfile(name).read()


def test_the_pause_archive_is_a_one_layer_image_under_its_tag():
    archive = pause.image_archive(b"\x7fELF not really")
    (manifest,) = json.loads(_read(archive, "manifest.json"))
    assert manifest["RepoTags"] == [config.PAUSE_IMAGE]
    (layer_name,) = manifest["Layers"]
    layer = _read(archive, layer_name)
    image_config = json.loads(_read(archive, manifest["Config"]))
    assert image_config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    assert image_config["config"]["Entrypoint"] == ["/pause"]
    binary = _members(layer)["pause"]
    assert binary.mode == 0o755
    assert _read(layer, "pause") == b"\x7fELF not really"


def test_the_same_pause_binary_gives_the_same_archive():
    assert pause.image_archive(b"same") == pause.image_archive(b"same")
    assert pause.image_archive(b"same") != pause.image_archive(b"other")


def test_lists_of_strings_are_written_as_toml_arrays():
    table = {"storage": {"allowed_host_paths": ["/srv/a", "/srv/b"], "empty": []}}
    assert tomllib.loads(config.to_toml(table)) == table
