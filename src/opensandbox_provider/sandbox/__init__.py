"""Sandboxes on an OpenSandbox server for common-ai's SandboxToolset."""

from opensandbox_provider.sandbox._snapshots import delete_snapshot, prepare_snapshot
from opensandbox_provider.sandbox._volumes import HostPath, NamedVolume
from opensandbox_provider.sandbox.backend import OpenSandboxBackend

__all__ = ["HostPath", "NamedVolume", "OpenSandboxBackend", "delete_snapshot", "prepare_snapshot"]
