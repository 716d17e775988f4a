"""The few apiserver calls ``up`` and ``status`` make, over TLS with the admin certificate."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from dev.kube import config
from dev.kube.paths import PKI_DIR

TIMEOUT_SECONDS = 5.0


def get(path: str) -> Any:
    """GETs ``path`` and decodes its JSON; raises OSError while the apiserver does not answer."""
    context = ssl.create_default_context(cafile=str(PKI_DIR / "ca.crt"))
    context.load_cert_chain(PKI_DIR / "admin.crt", PKI_DIR / "admin.key")
    request = urllib.request.Request(config.apiserver_url() + path)
    with urllib.request.urlopen(request, context=context, timeout=TIMEOUT_SECONDS) as answer:
        body = answer.read()
    return json.loads(body) if body.strip()[:1] in (b"{", b"[") else body.decode()


def ready() -> bool:
    try:
        return get("/readyz") == "ok"
    except (OSError, urllib.error.URLError):
        return False


def node_ready(name: str = config.NODE_NAME) -> bool | None:
    """The node's Ready condition; None while the node has not registered."""
    try:
        node = get(f"/api/v1/nodes/{name}")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


def version() -> str:
    return get("/version")["gitVersion"]


def has_default_service_account(namespace: str = "default") -> bool:
    """Whether pods can be created in ``namespace``: admission refuses them until the
    controller-manager has made its ``default`` ServiceAccount."""
    try:
        get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise
    return True
