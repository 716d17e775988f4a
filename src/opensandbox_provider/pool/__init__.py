"""Warm pools: ready sandboxes, kept by a keeper and shared by every worker (docs/pools.rst)."""

from opensandbox_provider.pool._definition import WarmPool
from opensandbox_provider.pool._keeper import Keeper, drain

__all__ = ["Keeper", "WarmPool", "drain"]
