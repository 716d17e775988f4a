"""What a server pool is: the name of a Pool that OpenSandbox's Kubernetes controller keeps."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A Pool is a namespaced Kubernetes object, and the server's BatchSandbox labels name it too:
# a DNS label, the stricter of the rules that apply to it.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class ServerPool:
    """
    A ``Pool`` resource on the Kubernetes cluster an OpenSandbox server runs sandboxes on
    (docs/pools.rst, "Server pools"): the controller keeps its pods started, and the server
    hands one to each create that names the pool.

    Unlike a :class:`~opensandbox_provider.pool.WarmPool`, nothing on the worker's side keeps
    it: it needs no keeper and no Redis. The Pool's pod template decides the image and the
    resources, not the backend's ``image``, ``cpu`` and ``memory``.

    :param name: The Pool's name in the namespace the server's ``[kubernetes]`` section names.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"A server pool's name is a Kubernetes Pool's name: lower-case letters, digits "
                f"and '-', at most 63, starting and ending with a letter or digit; got "
                f"{self.name!r}."
            )
