"""The lease keeper on its own, with a renew callable that records what it is asked to do."""

from __future__ import annotations

import threading

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider.sandbox._lease import RENEWALS_PER_LEASE, Leases, renewal_interval

# Short enough that a renewal comes every 0.1 s; the bound below keeps any wait finite.
LEASE = 0.3
WAIT_BOUND = 10.0


class Renewals:
    """Counts renewals per sandbox, and can be told the sandbox is gone or the server is not."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gone = False
        self.failure: Exception | None = None
        self._changed = threading.Condition()

    def __call__(self, sandbox: str) -> bool:
        with self._changed:
            self.calls.append(sandbox)
            self._changed.notify_all()
        if self.failure is not None:
            raise self.failure
        return not self.gone

    def count(self, sandbox: str) -> int:
        with self._changed:
            return self.calls.count(sandbox)

    def wait_for(self, sandbox: str, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(
                lambda: self.calls.count(sandbox) >= count, timeout=WAIT_BOUND
            ), f"{sandbox} was renewed {self.calls.count(sandbox)} times, expected {count}"


def lease_threads(sandbox: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"opensandbox-lease-{sandbox}"]


def wait_until_no_thread(sandbox: str) -> None:
    for thread in lease_threads(sandbox):
        thread.join(WAIT_BOUND)
    assert not lease_threads(sandbox)


@pytest.fixture
def renewals():
    return Renewals()


@pytest.fixture
def leases(renewals):
    keeper = Leases(renewals)
    yield keeper
    for sandbox in keeper.held():
        keeper.drop(sandbox)
        wait_until_no_thread(sandbox)


def test_the_lease_is_renewed_several_times_per_lease_length():
    assert renewal_interval(LEASE) == pytest.approx(LEASE / RENEWALS_PER_LEASE)


def test_each_sandbox_is_renewed_on_its_own_leases_schedule(leases, renewals):
    leases.hold("sb-short", lease=LEASE)
    leases.hold("sb-long", lease=1000 * LEASE)
    renewals.wait_for("sb-short", 5)
    # Held once, and renewed then; its first scheduled renewal is far off.
    assert renewals.count("sb-long") == 1


def test_holding_renews_before_it_returns(leases, renewals):
    leases.hold("sb-1", lease=LEASE)
    assert renewals.count("sb-1") >= 1


def test_a_held_sandbox_keeps_being_renewed(leases, renewals):
    leases.hold("sb-1", lease=LEASE)
    renewals.wait_for("sb-1", 4)
    assert leases.held() == {"sb-1"}


def test_dropping_stops_the_renewals(renewals):
    # The thread's first renewal is held until the test has dropped the sandbox, so the drop
    # lands at a known point: after one renewal began, before any other could.
    in_flight = threading.Event()
    let_go = threading.Event()

    def renew(sandbox: str) -> bool:
        alive = renewals(sandbox)
        if (
            threading.current_thread().name == f"opensandbox-lease-{sandbox}"
            and not let_go.is_set()
        ):
            in_flight.set()
            let_go.wait(WAIT_BOUND)
        return alive

    leases = Leases(renew)
    leases.hold("sb-1", lease=LEASE)
    assert in_flight.wait(WAIT_BOUND), "the renewal thread never renewed"
    [thread] = lease_threads("sb-1")
    leases.drop("sb-1")
    let_go.set()
    thread.join(WAIT_BOUND)
    assert not thread.is_alive()
    # The hold's renewal and the one under way at the drop: none began after it.
    assert renewals.count("sb-1") == 2
    assert leases.held() == frozenset()


def test_dropping_one_sandbox_leaves_the_others_renewed(leases, renewals):
    leases.hold("sb-1", lease=LEASE)
    leases.hold("sb-2", lease=LEASE)
    leases.drop("sb-1")
    before = renewals.count("sb-2")
    renewals.wait_for("sb-2", before + 2)
    assert leases.held() == {"sb-2"}


def test_a_sandbox_that_has_ended_is_no_longer_renewed(leases, renewals):
    leases.hold("sb-1", lease=LEASE)
    renewals.gone = True
    wait_until_no_thread("sb-1")
    assert leases.held() == frozenset()


def test_a_failed_renewal_is_tried_again(leases, renewals, caplog):
    leases.hold("sb-1", lease=LEASE)
    renewals.failure = ConnectionError("server restarting")
    renewals.wait_for("sb-1", 3)
    renewals.failure = None
    renewals.wait_for("sb-1", renewals.count("sb-1") + 2)
    assert leases.held() == {"sb-1"}
    assert "Could not renew the lease on sandbox sb-1" in caplog.text


def test_a_sandbox_already_gone_cannot_be_held(leases, renewals):
    renewals.gone = True
    with pytest.raises(SandboxTerminalError, match="no longer exists"):
        leases.hold("sb-1", lease=LEASE)
    assert leases.held() == frozenset()
    assert not lease_threads("sb-1")


def test_a_first_renewal_that_fails_is_raised_and_nothing_is_held(leases, renewals):
    renewals.failure = ConnectionError("server down")
    with pytest.raises(ConnectionError):
        leases.hold("sb-1", lease=LEASE)
    assert leases.held() == frozenset()
    assert not lease_threads("sb-1")


def test_holding_twice_renews_again_on_one_thread(leases, renewals):
    leases.hold("sb-1", lease=LEASE)
    first = renewals.count("sb-1")
    leases.hold("sb-1", lease=LEASE)
    assert renewals.count("sb-1") > first
    assert len(lease_threads("sb-1")) == 1


def test_renewals_run_on_daemon_threads_so_they_die_with_the_worker(leases):
    leases.hold("sb-1", lease=LEASE)
    assert [thread.daemon for thread in lease_threads("sb-1")] == [True]


def test_dropping_a_sandbox_never_held_does_nothing(leases):
    leases.drop("sb-unknown")
    assert leases.held() == frozenset()


def test_a_sandbox_renewed_a_moment_ago_is_held_without_renewing_it_again_first() -> None:
    renewals = Renewals()
    leases = Leases(renewals)
    leases.hold("drawn", lease=60, renewed=True)
    try:
        assert renewals.count("drawn") == 0
        assert len(lease_threads("drawn")) == 1
    finally:
        leases.drop("drawn")
    wait_until_no_thread("drawn")


# Long enough that no renewal comes from the thread while a test below runs: each count is
# the hold's and the closing renewal's alone.
LONG_LEASE = 3600.0


def test_a_release_of_a_held_sandbox_owes_one_closing_renewal(leases, renewals) -> None:
    leases.hold("sbx", lease=LONG_LEASE)
    leases.release("sbx")
    assert leases.held() == frozenset()
    wait_until_no_thread("sbx")
    assert renewals.count("sbx") == 1

    assert leases.close("sbx") is True
    assert renewals.count("sbx") == 2
    # Made once: closing again renews nothing.
    assert leases.close("sbx") is True
    assert renewals.count("sbx") == 2


def test_a_sandbox_never_held_is_owed_no_closing_renewal(leases, renewals) -> None:
    leases.release("sbx")
    assert leases.close("sbx") is True
    assert renewals.calls == []


def test_a_closing_renewal_that_fails_is_owed_still_to_the_retry(leases, renewals) -> None:
    leases.hold("sbx", lease=LONG_LEASE)
    leases.release("sbx")
    renewals.failure = RuntimeError("server restarting")
    with pytest.raises(RuntimeError):
        leases.close("sbx")
    # The retry of the release finds the lease dropped, and the debt still there.
    renewals.failure = None
    leases.release("sbx")
    assert leases.close("sbx") is True
    assert renewals.count("sbx") == 3


def test_a_closing_renewal_says_the_sandbox_is_gone(leases, renewals, caplog) -> None:
    leases.hold("sbx", lease=LONG_LEASE)
    leases.release("sbx")
    renewals.gone = True
    with caplog.at_level("INFO", logger="opensandbox_provider"):
        assert leases.close("sbx") is False
    assert "Sandbox sbx ended before it was released." in caplog.messages


def test_a_forgiven_release_owes_nothing(leases, renewals) -> None:
    leases.hold("sbx", lease=LONG_LEASE)
    leases.release("sbx")
    leases.forgive("sbx")
    assert leases.close("sbx") is True
    assert renewals.count("sbx") == 1
