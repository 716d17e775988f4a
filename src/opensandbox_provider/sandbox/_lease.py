"""
Sandbox lifetimes as leases: renewed while this process holds a sandbox, left to lapse after,
so that a dead worker's sandbox ends within one lease (docs/backend.rst, "Leases").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

log = logging.getLogger(__name__)

# Renewing three times per lease lets two renewals in a row fail, a server restart or a
# network blip, before the sandbox expires under a live holder.
RENEWALS_PER_LEASE = 3


def renewal_interval(lease: float) -> float:
    """How often a sandbox on a lease of ``lease`` seconds is renewed."""
    return lease / RENEWALS_PER_LEASE


class Leases:
    """
    The sandboxes this process holds, each renewed on a daemon thread until dropped. ``renew``
    moves one sandbox's expiry to one lease from now; ``False`` (it is gone) ends its renewals.
    """

    def __init__(self, renew: Callable[[str], bool]) -> None:
        self._renew = renew
        self._held: dict[str, threading.Event] = {}
        # Sandboxes released while held whose closing renewal has not been made yet.
        self._owed: set[str] = set()
        self._lock = threading.Lock()

    def hold(self, sandbox: str, *, lease: float, renewed: bool = False) -> None:
        """
        Renew ``sandbox`` now, then every third of ``lease`` seconds (the sandbox's own, its
        creator's) until :meth:`drop`; a second hold keeps the one thread. Renewing first gives
        a holder that arrives late, just before the provisioned expiry, a whole lease.
        ``renewed`` says the caller just did, as a draw from a warm pool does.
        """
        if not renewed and not self._renew(sandbox):
            raise SandboxTerminalError(
                f"Sandbox {sandbox} no longer exists on the server, or has ended there, so it "
                "cannot be held. The task that provisioned it may have destroyed it, or its "
                "lifetime ran out."
            )
        with self._lock:
            if sandbox in self._held:
                return
            stop = self._held[sandbox] = threading.Event()
        threading.Thread(
            target=self._keep,
            args=(sandbox, stop, renewal_interval(lease)),
            name=f"opensandbox-lease-{sandbox}",
            daemon=True,
        ).start()

    def drop(self, sandbox: str) -> None:
        """Stop renewing ``sandbox``; from here its expiry is whatever the last renewal set."""
        with self._lock:
            stop = self._held.pop(sandbox, None)
        if stop is not None:
            stop.set()

    def release(self, sandbox: str) -> None:
        """
        Stop renewing ``sandbox``, owing it one closing renewal if it was held, which
        :meth:`close` makes. The debt outlives the renewals: a release that failed is retried,
        and the retry finds the sandbox no longer held.
        """
        with self._lock:
            if sandbox in self._held:
                self._owed.add(sandbox)
        self.drop(sandbox)

    def forgive(self, sandbox: str) -> None:
        """Owe ``sandbox`` nothing: its release failed for good, so nothing collects it."""
        with self._lock:
            self._owed.discard(sandbox)

    def close(self, sandbox: str) -> bool:
        """
        Make the closing renewal ``sandbox`` is owed, if any, so that the task that collects
        its files finds a whole lease; ``False`` if it turned out to be gone.
        """
        with self._lock:
            if sandbox not in self._owed:
                return True
        alive = self._renew(sandbox)
        if not alive:
            log.info("Sandbox %s ended before it was released.", sandbox)
        # Only once made: a renewal that raised is owed still, to the release's retry.
        self.forgive(sandbox)
        return alive

    def held(self) -> frozenset[str]:
        """The sandboxes being renewed right now."""
        with self._lock:
            return frozenset(self._held)

    def _keep(self, sandbox: str, stop: threading.Event, interval: float) -> None:
        while not stop.wait(interval):
            try:
                alive = self._renew(sandbox)
            except Exception:
                # Everything, on purpose: this thread is not the task's, so neither the task
                # timeout nor KeyboardInterrupt reaches it, and a renewal thread that died on
                # an unforeseen error would let the sandbox expire under a task that still runs.
                log.warning(
                    "Could not renew the lease on sandbox %s; trying again in %.0fs",
                    sandbox,
                    interval,
                    exc_info=True,
                )
                continue
            if not alive:
                log.info("Sandbox %s has ended; no longer renewing its lease", sandbox)
                # Only this thread's own entry: a new hold of the same sandbox may have
                # replaced it.
                with self._lock:
                    if self._held.get(sandbox) is stop:
                        del self._held[sandbox]
                return
