"""The command line of each process of the cluster, in the order ``up`` starts them.

Every listener is on loopback except the kubelet's, which serves on the node's own address
because that is where the apiserver reaches it for logs and exec (the kubelet refuses a
loopback node address).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dev.kube import build, config, network

ETCD_URL = f"http://127.0.0.1:{config.ETCD_CLIENT_PORT}"
# The issuer of service-account tokens, as in-cluster clients know the apiserver.
SERVICE_ACCOUNT_ISSUER = f"https://kubernetes.default.svc.{config.CLUSTER_DOMAIN}"
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


@dataclass(frozen=True)
class Layout:
    """The files the command lines name."""

    pki: Path
    config: Path
    etcd_data: Path
    kubelet_root: Path

    def kubeconfig(self, component: str) -> Path:
        return self.config / f"{component}.kubeconfig"


def binary(command: str) -> str:
    path = build.cache_dir() / "bin" / command
    if not path.exists():
        raise RuntimeError(
            f"{command} is not built ({path} is missing). Run `make kube-build` first; it "
            "takes about half an hour on two cores."
        )
    return str(path)


def etcd(layout: Layout) -> list[str]:
    peer = f"http://127.0.0.1:{config.ETCD_PEER_PORT}"
    return [
        "etcd",
        "--name",
        config.NODE_NAME,
        "--data-dir",
        str(layout.etcd_data),
        "--listen-client-urls",
        ETCD_URL,
        "--advertise-client-urls",
        ETCD_URL,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        f"{config.NODE_NAME}={peer}",
    ]


def apiserver(layout: Layout, node_ip: str) -> list[str]:
    pki = layout.pki
    return [
        binary("kube-apiserver"),
        "--bind-address=127.0.0.1",
        f"--secure-port={config.APISERVER_PORT}",
        # The `kubernetes` Service's endpoint; its validation rejects a loopback address.
        f"--advertise-address={node_ip}",
        f"--etcd-servers={ETCD_URL}",
        f"--service-cluster-ip-range={network.SERVICE_CIDR}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--profiling=false",
    ]


def controller_manager(layout: Layout) -> list[str]:
    pki, kubeconfig = layout.pki, layout.kubeconfig("controller-manager")
    return [
        binary("kube-controller-manager"),
        "--bind-address=127.0.0.1",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={network.SERVICE_CIDR}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        "--profiling=false",
    ]


def scheduler(layout: Layout) -> list[str]:
    kubeconfig = layout.kubeconfig("scheduler")
    return [
        binary("kube-scheduler"),
        "--bind-address=127.0.0.1",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--profiling=false",
    ]


def kubelet(layout: Layout, node_ip: str) -> list[str]:
    return [
        binary("kubelet"),
        f"--config={layout.config / 'kubelet.json'}",
        f"--kubeconfig={layout.kubeconfig('kubelet')}",
        f"--root-dir={layout.kubelet_root}",
        f"--hostname-override={config.NODE_NAME}",
        f"--node-ip={node_ip}",
    ]
