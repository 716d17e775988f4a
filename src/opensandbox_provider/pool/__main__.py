"""
``python -m opensandbox_provider.pool keep|drain|status module:attribute``: the keeper process.

The pool is named as the Dags name it, by the module that defines it and the attribute that
holds it (``my_pools:PYTHON``), so the keeper and every worker read one definition.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading

from opensandbox_provider.pool._definition import WarmPool
from opensandbox_provider.pool._keeper import LOCK_SECONDS, Keeper, drain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opensandbox_provider.pool")
    commands = parser.add_subparsers(dest="command", required=True)
    keep = commands.add_parser("keep", help="hold the pool at its size until stopped")
    keep.add_argument("pool", help="module:attribute of the WarmPool")
    keep.add_argument(
        "--lock-seconds",
        type=float,
        default=LOCK_SECONDS,
        help="how soon another keeper takes over from one that died",
    )
    for name, purpose in (
        ("drain", "destroy every idle sandbox of the pool (stop its keepers first)"),
        ("status", "print how many idle sandboxes the pool holds"),
    ):
        commands.add_parser(name, help=purpose).add_argument("pool", help="module:attribute")
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    pool = load(arguments.pool)
    from opensandbox.exceptions import PoolStateStoreUnavailableException

    try:
        if arguments.command == "keep":
            run_keeper(Keeper(pool, lock_seconds=arguments.lock_seconds))
        elif arguments.command == "drain":
            print(f"Destroyed {drain(pool)} idle sandboxes of warm pool {pool.name}.")
        else:
            print(f"Warm pool {pool.name}: {Keeper(pool).idle()} of {pool.size} idle.")
    except PoolStateStoreUnavailableException as e:
        raise SystemExit(
            f"The Redis of warm pool {pool.name} cannot be reached ({e}). Check the pool's "
            "store, its URL or Airflow connection, and that Redis runs there."
        ) from e
    return 0


def load(reference: str) -> WarmPool:
    """The pool ``module:attribute`` names, or a message saying what is wrong with it."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise SystemExit(
            f"Name the pool as module:attribute, such as my_pools:PYTHON; got {reference!r}."
        )
    pool = getattr(importlib.import_module(module_name), attribute, None)
    if not isinstance(pool, WarmPool):
        raise SystemExit(
            f"{reference} is {type(pool).__name__}, not a WarmPool: name the attribute that holds "
            "the pool's definition."
        )
    return pool


def run_keeper(keeper: Keeper) -> None:
    """Keep the pool until SIGTERM or SIGINT, then stop making sandboxes and leave."""
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    with keeper:
        stopping.wait()


if __name__ == "__main__":
    sys.exit(main())
