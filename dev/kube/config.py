"""The configuration files of the cluster's components, as pure functions of its addresses.

Kubeconfigs and the kubelet's configuration are written as JSON, which both read as YAML; the
containerd configuration is TOML, rendered by the small writer below (the standard library
reads TOML but does not write it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CLUSTER_NAME = "opensandbox-kube"
NODE_NAME = "opensandbox-node"
APISERVER_PORT = 6443
# etcd away from its default ports, so a system etcd (Debian's package ships one) never clashes.
ETCD_CLIENT_PORT = 12379
ETCD_PEER_PORT = 12380
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
# The only image the node needs before any pod: built here, never pulled (dev/kube/pause.py).
PAUSE_IMAGE = "opensandbox-kube/pause:local"
CLUSTER_DOMAIN = "cluster.local"


def apiserver_url() -> str:
    return f"https://127.0.0.1:{APISERVER_PORT}"


def kubeconfig(ca_cert: Path, client_cert: Path, client_key: Path, user: str) -> dict[str, Any]:
    """A kubeconfig naming files, not embedding them, so a re-issued certificate is picked up."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {"server": apiserver_url(), "certificate-authority": str(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client_cert), "client-key": str(client_key)},
            }
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
    }


def resolv_conf(nameserver: str) -> str:
    """The resolv.conf the kubelet hands every pod: our resolver's, so a pod resolves names
    only through it, as the Docker stack's sandboxes do (dev/stack/resolver.py)."""
    return f"nameserver {nameserver}\n"


def kubelet_config(
    pki: Path, runtime_socket: Path, node_ip: str, resolv_conf_file: Path
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{runtime_socket}",
        # Docker on this machine runs its containers under cgroupfs too; no systemd here.
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv_conf_file),
        # Images are imported by hand and cannot be pulled again, so the kubelet must never
        # collect them; and a busy shared disk must not evict test pods or taint the node.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "staticPodPath": "",
        # Lowering its own OOM score needs CAP_SYS_RESOURCE, which a VM or container may lack.
        "oomScoreAdj": 0,
    }


def containerd_config(
    state_dir: Path, cni_conf_dir: Path, cni_bin_dir: Path, registry_hosts_dir: Path | None = None
) -> dict[str, Any]:
    """A containerd of our own: its root, state, socket and runc root all under ``state_dir``,
    so it shares nothing with the containerd Docker runs. With ``registry_hosts_dir`` the
    kubelet's pulls read each registry's ``hosts.toml`` there (the snapshot registry's)."""
    cri = "io.containerd.grpc.v1.cri"
    table = {
        "version": 2,
        "root": str(state_dir / "root"),
        "state": str(state_dir / "state"),
        "grpc": {"address": str(state_dir / "containerd.sock")},
        "ttrpc": {"address": str(state_dir / "containerd.sock.ttrpc")},
        "debug": {"address": ""},
        "metrics": {"address": ""},
        "plugins": {
            "io.containerd.internal.v1.opt": {"path": str(state_dir / "opt")},
            cri: {
                "sandbox_image": PAUSE_IMAGE,
                # Pod sandboxes ask for an OOM score below containerd's own, which needs
                # CAP_SYS_RESOURCE; in a VM or container without it runc fails to start any
                # pod. Capped at containerd's own score, every pod starts either way.
                "restrict_oom_score_adj": True,
                # Exec and port-forward streams, on loopback and a port the kernel picks.
                "stream_server_address": "127.0.0.1",
                "stream_server_port": "0",
                # Pods' network namespaces under our state too, not in the host's /run/netns.
                "netns_mounts_under_state_dir": True,
                "containerd": {
                    "snapshotter": "overlayfs",
                    "default_runtime_name": "runc",
                    "runtimes": {
                        "runc": {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {
                                "SystemdCgroup": False,
                                "Root": str(state_dir / "runc"),
                            },
                        }
                    },
                },
                "cni": {"bin_dir": str(cni_bin_dir), "conf_dir": str(cni_conf_dir)},
            },
        },
    }
    if registry_hosts_dir is not None:
        table["plugins"][cri]["registry"] = {"config_path": str(registry_hosts_dir)}
    return table


def to_toml(table: dict[str, Any]) -> str:
    """TOML for nested tables of strings, booleans, integers and their lists: what
    containerd's and the OpenSandbox server's configurations hold."""
    lines: list[str] = []
    _toml_table(table, [], lines)
    return "\n".join(lines).strip() + "\n"


def _toml_table(table: dict[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    if path and scalars:
        lines.append("")
        lines.append("[" + ".".join(_toml_key(part) for part in path) + "]")
    for key, value in scalars.items():
        lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in tables.items():
        _toml_table(value, [*path, key], lines)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(
        f"to_toml writes strings, booleans, integers and lists, not {type(value).__name__}."
    )
