"""OpenSandbox's ingress gateway on the local cluster: the route production Kubernetes uses.

The gateway (``components/ingress`` of OpenSandbox's repository, a Go reverse proxy) watches the
BatchSandbox resources and forwards a request carrying ``OpenSandbox-Ingress-To: <id>-<port>``
to that sandbox's pod. A server with ``[ingress] mode = "gateway"`` answers each endpoint as the
gateway's address plus that header, so a client that does not use the server's proxy goes
through the gateway. Like the controller it is built by hand and named by a variable,
``KUBE_INGRESS_BIN``; without it the cluster runs no gateway (docs/kubernetes.rst, "Routes").

``KUBE_ROUTE=gateway`` at ``make kube-server-up`` puts the three servers the suite uses in
gateway mode as well, with connections that leave the server's proxy off, so the whole
Kubernetes selection runs through the gateway.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PROCESS = "opensandbox-ingress"
# The gateway listens on every address of this host (it has no flag to bind one), on a port
# beside the servers'; the servers name its loopback address.
PORT = 18188
ADDRESS = f"127.0.0.1:{PORT}"
HEALTH = f"http://{ADDRESS}/status.ok"
ROUTES = ("proxy", "gateway")


def configured() -> Path | None:
    """The gateway's binary, or None when ``KUBE_INGRESS_BIN`` is unset."""
    binary = os.environ.get("KUBE_INGRESS_BIN", "").strip()
    if not binary:
        if route() == "gateway":
            raise RuntimeError(
                "KUBE_ROUTE=gateway needs the gateway: set KUBE_INGRESS_BIN to OpenSandbox's "
                "ingress binary (built from components/ingress of its repository)."
            )
        return None
    if not os.access(binary, os.X_OK):
        raise RuntimeError(
            f"KUBE_INGRESS_BIN names {binary}, which is not an executable file. Build "
            "components/ingress of OpenSandbox's repository and name its binary, or unset it."
        )
    return Path(binary)


def route() -> str:
    """The route the suite's three servers give: their own proxy (the default) or the gateway."""
    chosen = os.environ.get("KUBE_ROUTE", "").strip() or "proxy"
    if chosen not in ROUTES:
        raise RuntimeError(f"KUBE_ROUTE={chosen} is not a route here; use proxy or gateway.")
    return chosen


def argv(binary: Path) -> list[str]:
    # Header routing: the mode the server's `route.mode = "header"` answers for; no renew
    # intents (the servers' leases are renewed by the clients themselves).
    return [str(binary), "--provider-type=batchsandbox", "--mode=header", f"--port={PORT}"]


def environment(kubeconfig: Path) -> dict[str, str]:
    # The gateway parses its own flags before knative's, so a --kubeconfig flag is refused;
    # knative reads the variable instead.
    return {**os.environ, "KUBECONFIG": str(kubeconfig)}


def server_ingress() -> dict[str, Any]:
    """The ``[ingress]`` table of a server whose endpoints lead to the gateway."""
    return {"mode": "gateway", "gateway": {"address": ADDRESS, "route": {"mode": "header"}}}
