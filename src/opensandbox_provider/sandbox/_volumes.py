"""
Data mounted into a sandbox rather than streamed through the worker (docs/prepared-environments.rst,
"Mounting data"). Read-only is the default because a mount is shared: a model told to tidy up
its workspace must not be able to delete the data set every other task reads.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider._errors import status_of, to_sandbox_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opensandbox.models.sandboxes import Volume


@dataclass(frozen=True)
class NamedVolume:
    """
    A named volume mounted at ``mount_path``.

    :param volume: The volume's name: a Docker named volume, or a PVC on Kubernetes.
    :param mount_path: Where it appears in the sandbox, an absolute path.
    :param read_only: Mount it read-only, the default.
    :param sub_path: Mount only this directory of the volume, relative to its root.
    :param created_with_sandbox: Create the volume when it does not exist, and remove it
        when the sandbox that created it is destroyed: scratch space that other sandboxes
        may mount while its creator lives. Off by default, so that a misspelt name fails
        instead of mounting an empty volume.
    """

    volume: str
    mount_path: str
    read_only: bool = True
    sub_path: str | None = None
    created_with_sandbox: bool = False


@dataclass(frozen=True)
class HostPath:
    """
    A directory of the machine that runs the sandboxes, mounted at ``mount_path``.

    The server must list it, or a directory above it, in ``[storage] allowed_host_paths``.

    :param path: The directory on that machine, an absolute path.
    :param mount_path: Where it appears in the sandbox, an absolute path.
    :param read_only: Mount it read-only, the default.
    :param sub_path: Mount only this directory under ``path``.
    """

    path: str
    mount_path: str
    read_only: bool = True
    sub_path: str | None = None


Mount = NamedVolume | HostPath

# The server answers a volume it will not mount with a code of this family.
_VOLUME_CODE = "VOLUME::"
_ADVICE = {
    "VOLUME::HOST_PATH_NOT_ALLOWED": (
        "The server mounts host paths only under the prefixes of its [storage] "
        "allowed_host_paths setting, which is empty unless its operator set it: add the "
        "directory, or one above it, to that list in the server's configuration and restart "
        "it, or mount a NamedVolume instead."
    ),
    "VOLUME::PVC_NOT_FOUND": (
        "Create the named volume on the server's runtime first, or pass "
        "NamedVolume(created_with_sandbox=True) for scratch space that lives with the sandbox."
    ),
}


def checked(volumes: Sequence[Mount] | None) -> tuple[Mount, ...]:
    """``volumes`` as the backend keeps them, refusing what the server would."""
    mounts = tuple(volumes or ())
    seen: set[str] = set()
    for mount in mounts:
        if not isinstance(mount, NamedVolume | HostPath):
            raise ValueError(
                f"volumes holds {mount!r}; give NamedVolume(...) or HostPath(...) entries."
            )
        where = mount.path if isinstance(mount, HostPath) else mount.volume
        if not isinstance(where, str) or not where.strip():
            raise ValueError(f"{mount!r} names no volume or host path.")
        if isinstance(mount, HostPath) and not posixpath.isabs(mount.path):
            raise ValueError(f"HostPath path must be absolute, got {mount.path!r}.")
        if not isinstance(mount.mount_path, str) or not posixpath.isabs(mount.mount_path):
            raise ValueError(
                f"mount_path must be an absolute path in the sandbox, got {mount.mount_path!r}."
            )
        target = posixpath.normpath(mount.mount_path)
        if target in seen:
            raise ValueError(f"Two volumes are mounted at {target!r}; give each its own path.")
        seen.add(target)
    return mounts


def sdk_volumes(mounts: Sequence[Mount]) -> list[Volume] | None:
    """The mounts as the SDK sends them, or ``None`` for none."""
    if not mounts:
        return None
    from opensandbox.models.sandboxes import PVC, Host, Volume

    return [
        Volume(
            # The server wants a name per mount, unique in the request; nothing reads it.
            name=f"volume-{index}",
            host=Host(path=mount.path) if isinstance(mount, HostPath) else None,
            pvc=None
            if isinstance(mount, HostPath)
            else PVC(
                claimName=mount.volume,
                createIfNotExists=mount.created_with_sandbox,
                deleteOnSandboxTermination=mount.created_with_sandbox,
            ),
            mountPath=mount.mount_path,
            readOnly=mount.read_only,
            subPath=mount.sub_path,
        )
        for index, mount in enumerate(mounts)
    ]


def explain_refusal(error: Exception, mounts: Sequence[Mount]) -> Exception | None:
    """A create refused for one of its volumes, with what to do about it; else ``None``."""
    if not mounts or status_of(error) is None:
        return None
    code = str(getattr(getattr(error, "error", None), "code", "") or "")
    if not code.startswith(_VOLUME_CODE) and _VOLUME_CODE not in str(error):
        return None
    detail = to_sandbox_error(error, "create a sandbox", terminal=True)
    advice = next((text for key, text in _ADVICE.items() if key in f"{code} {error}"), "")
    return SandboxTerminalError(
        f"{detail} The server would not mount one of the sandbox's volumes. {advice}".strip()
    )
