"""Where a warm pool's state lives: the SDK's Redis store, named by URL or Airflow connection."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opensandbox.pool_types import PoolStateStore
    from redis import Redis

    from opensandbox_provider.pool._definition import WarmPool

INSTALL_COMMAND = 'pip install "airflow-provider-opensandbox[opensandbox,pool]"'
# Every key the pools write starts with this, apart from anything else kept in the same Redis.
KEY_PREFIX = "airflow-opensandbox:pool"
# A draw falls back to a cold create when Redis does not answer; these bound how long that
# takes, so a dead store costs a task seconds, not the client's default of waiting forever.
CONNECT_TIMEOUT_SECONDS = 2.0
REPLY_TIMEOUT_SECONDS = 5.0

_stores: dict[str, PoolStateStore] = {}
_lock = threading.Lock()


def state_store(pool: WarmPool) -> PoolStateStore:
    """The pool's store; one Redis client per process for each URL or connection id."""
    if not isinstance(pool.store, str):
        return pool.store
    with _lock:
        store = _stores.get(pool.store)
        if store is None:
            try:
                from opensandbox.redis_pool_store import RedisPoolStateStore
            except ImportError as e:
                raise ImportError(
                    f"Warm pools keep their state in Redis, whose client is not installed. "
                    f"Install it with: {INSTALL_COMMAND}"
                ) from e
            store = RedisPoolStateStore(_client(pool.store), key_prefix=KEY_PREFIX)
            _stores[pool.store] = store
        return store


def _client(store: str) -> Redis:
    from redis import Redis

    if "://" in store:
        return Redis.from_url(
            store,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=REPLY_TIMEOUT_SECONDS,
        )
    from airflow.providers.common.compat.sdk import BaseHook

    from opensandbox_provider.hooks.opensandbox import (
        InvalidConnectionError,
        _ca_certificates,
        _optional_bool,
    )

    # The fields of Airflow's own Redis connection type: host, port, login, password, and
    # the database and TLS in its extra, ssl_ca_certs naming the authority to trust as
    # Airflow's Redis provider names it. The UI saves "false" as text, which is false here.
    conn = BaseHook.get_connection(store)
    extra = conn.extra_dejson
    tls = bool(_optional_bool(extra.get("ssl"), "ssl", store))
    authority = _ca_certificates(extra.get("ssl_ca_certs"), store, "ssl_ca_certs")
    if authority is not None and not tls:
        raise InvalidConnectionError(
            f"The ssl_ca_certs extra of connection {store!r} names an authority to trust, but "
            "its ssl extra does not turn TLS on; set ssl to true, or drop ssl_ca_certs."
        )
    return Redis(
        host=conn.host or "localhost",
        port=conn.port or 6379,
        db=int(extra.get("db", 0)),
        username=conn.login or None,
        password=conn.password or None,
        ssl=tls,
        ssl_ca_data=authority,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=REPLY_TIMEOUT_SECONDS,
    )
