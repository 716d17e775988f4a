"""
Warm pools: ready sandboxes, kept by a keeper and shared by every worker; and server pools,
kept by OpenSandbox's Kubernetes controller (docs/pools.rst).
"""

from opensandbox_provider.pool._definition import WarmPool
from opensandbox_provider.pool._keeper import Keeper, drain
from opensandbox_provider.pool._server_pool import ServerPool

__all__ = ["Keeper", "ServerPool", "WarmPool", "drain"]
