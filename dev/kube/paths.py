"""Where the local cluster keeps its files: everything ``up`` creates lives under ``.kube/``.

The directory is git-ignored. ``down`` stops the processes and removes etcd's data, so the next
``up`` starts an empty cluster with the certificates and the images containerd already holds;
removing ``.kube/`` after ``down`` starts the next cluster from nothing.
"""

from pathlib import Path

from dev.stack.processes import ProcessTable

REPO = Path(__file__).resolve().parents[2]
KUBE_DIR = REPO / ".kube"
STATE_FILE = KUBE_DIR / "state.json"
# The Kubernetes-mode OpenSandbox servers, in the Docker stack's state format.
SERVER_STATE_FILE = KUBE_DIR / "stack-state.json"
LOCK_FILE = KUBE_DIR / "lock"
PKI_DIR = KUBE_DIR / "pki"
CONFIG_DIR = KUBE_DIR / "config"
CNI_CONF_DIR = KUBE_DIR / "cni" / "net.d"
# What the kubelet writes into each pod's /etc/resolv.conf.
POD_RESOLV_CONF = CONFIG_DIR / "pod-resolv.conf"
ETCD_DIR = KUBE_DIR / "etcd"
CONTAINERD_DIR = KUBE_DIR / "containerd"
CONTAINERD_SOCKET = CONTAINERD_DIR / "containerd.sock"
KUBELET_DIR = KUBE_DIR / "kubelet"
IMAGES_DIR = KUBE_DIR / "images"
ADMIN_KUBECONFIG = KUBE_DIR / "admin.kubeconfig"
PROCESSES = ProcessTable(KUBE_DIR / "run", KUBE_DIR / "logs")
SOURCES = Path(__file__).resolve().parent
