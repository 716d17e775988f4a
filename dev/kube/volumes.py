"""Storage for the named volumes a sandbox asks the Kubernetes runtime to make.

The server makes a named volume as a PersistentVolumeClaim of the cluster's default class
(``created_with_sandbox``); the local cluster has no storage provisioner, so a claim would
wait, and its pod with it, until the server's ``KUBERNETES::POD_READY_TIMEOUT``. A platform
gives its cluster storage; the tests give each claim they expect a PersistentVolume of its
own, a directory on this node bound to that claim by name, and delete it afterwards.

A claim the server made with a sandbox is that sandbox's alone (it refuses to mount it into
another, which would delete it under the first); storage shared between sandboxes is a claim
made beforehand, as ``user_claim=True`` makes one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from dev.kube.opensandbox import HOST_MOUNTS, NAMESPACE, kubectl


@contextmanager
def storage_for(claim: str, size: str = "1Gi", *, user_claim: bool = False) -> Iterator[None]:
    """A PersistentVolume that only the claim ``claim`` in the servers' namespace binds, and
    with ``user_claim`` that claim too."""
    directory = HOST_MOUNTS / "volumes" / claim
    directory.mkdir(parents=True, exist_ok=True)
    name = f"pv-{claim}"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": NAMESPACE, "name": claim},
            "hostPath": {"path": str(directory), "type": "Directory"},
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(volume))
    if user_claim:
        kubectl("apply", "-f", "-", stdin=json.dumps(_claim(claim, size)))
    try:
        yield
    finally:
        if user_claim:
            kubectl("delete", "pvc", claim, "-n", NAMESPACE, "--wait=false", check=False)
        kubectl("delete", "pv", name, "--wait=false", check=False)
        shutil.rmtree(directory, ignore_errors=True)


def _claim(name: str, size: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": f"pv-{name}",
            "resources": {"requests": {"storage": size}},
        },
    }
