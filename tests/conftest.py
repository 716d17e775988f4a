"""Fixtures for tests against the local OpenSandbox stack; the run-wide leak check is in
tests/leak_check.py.

Only tests that request a stack fixture touch Docker or the servers, so unit tests run anywhere.
"""

import os
import time
import urllib.error
import urllib.request

import pytest

from dev.stack.images import ROLES
from dev.stack.state import ServerInfo, StackState, read_state, runtime
from tests import kubernetes_selection, leak_check
from tests.run_summary import RunSummary

DEPLOYMENT_VARIABLE = "AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID"
TEST_DEPLOYMENT = "opensandbox-tests"
STACK_FIXTURES = {"stack", "plain_server", "dns_server", "dns_nft_server"}
HEALTH_WAIT_SECONDS = 30


def pytest_configure(config: pytest.Config) -> None:
    # The SDK otherwise posts telemetry to the server after every create.
    os.environ["OPENSANDBOX_DISABLE_METRICS"] = "1"
    # The deployment this process stamps on what it creates and lists by: one of its own, so
    # that it needs no Airflow metadata database. An Airflow a test starts gets none of the
    # test's AIRFLOW__ settings, so it keeps the id its own database makes.
    os.environ.setdefault(DEPLOYMENT_VARIABLE, TEST_DEPLOYMENT)
    _keep_the_stacks_named_images()
    if not leak_check.is_xdist_worker(config):
        # What this run showed, for the claims table of docs/verification.rst; with xdist the
        # controller hears every worker's reports and writes it once.
        config.pluginmanager.register(RunSummary.for_config(config), "run-summary")
    if getattr(config.option, "numprocesses", None):
        # Airflow writes a default airflow.cfg into AIRFLOW_HOME the first time it is imported;
        # here, before any worker starts, so that workers importing it at once do not race.
        import airflow.configuration  # noqa: F401
    # Where it sees every sandbox of the run: this process, or xdist's controller.
    leak_check.register(config)
    # With -n, how xdist's controller shares the suite among its workers (tests/work_units.py).
    # Imported only then: the compatibility matrix's environments have no xdist.
    if config.pluginmanager.has_plugin("xdist") and not leak_check.is_xdist_worker(config):
        from tests import work_units

        config.pluginmanager.register(work_units, "opensandbox-work-units")


def _keep_the_stacks_named_images() -> None:
    """A test that brings the stack up itself (``make demo``) must not swap a named image for
    our stand-in: each role the running stack serves from a named image stays named for every
    process the suite starts, also when pytest was run without the variable."""
    try:
        state = read_state()
    except RuntimeError:
        return
    for role, variable in ROLES.items():
        if state.runs_named(role) and not os.environ.get(variable, "").strip():
            os.environ[variable] = state.images[role]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if runtime() == "kubernetes":
        kubernetes_selection.keep_what_runs_on_kubernetes(config, items)
    if leak_check.is_xdist_worker(config):
        from tests import work_units

        # Every worker collects, in the same order; the controller hands out units in it.
        work_units.in_unit_order(items)
    # So that `-m "not stack"` selects exactly the tests that run without Docker.
    for item in items:
        if STACK_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.stack)
    _skip_stand_in_only_tests_on_named_images(items)
    _skip_what_this_airflow_lacks(items)
    _skip_what_kubernetes_does_not_offer(items)
    _skip_snapshots_where_the_servers_take_none(items)


def _skip_what_this_airflow_lacks(items: list[pytest.Item]) -> None:
    """On an Airflow line older than a test's ``airflow_at_least`` marker names (the
    compatibility matrix runs the unit suite on each line), the test is skipped, saying which
    version it needs and why; on the project's own Airflow every test runs."""
    marked = [item for item in items if item.get_closest_marker("airflow_at_least")]
    if not marked:
        return
    from importlib.metadata import version

    from packaging.version import Version

    installed = Version(version("apache-airflow"))
    for item in marked:
        marker = item.get_closest_marker("airflow_at_least")
        assert marker is not None
        needed = Version(marker.args[0])
        if installed < needed:
            reason = marker.kwargs.get("reason", "")
            item.add_marker(
                pytest.mark.skip(
                    reason=f"airflow_at_least: needs Airflow {needed}, this is {installed}: "
                    f"{reason}"
                )
            )


def _skip_what_kubernetes_does_not_offer(items: list[pytest.Item]) -> None:
    """With ``RUNTIME=kubernetes``, a test of a feature the server's Kubernetes runtime refuses
    is skipped with the server's own answer; on Docker it runs."""
    if runtime() != "kubernetes":
        return
    for item in items:
        marker = item.get_closest_marker("not_on_kubernetes")
        if marker:
            reason = marker.kwargs.get("reason", "the Kubernetes runtime does not offer it")
            item.add_marker(pytest.mark.skip(reason=f"not_on_kubernetes: {reason}"))


def _marked_with_state(
    items: list[pytest.Item], marker: str
) -> tuple[list[pytest.Item], StackState | None]:
    """The items with ``marker``, and the stack's state when there are some and a stack;
    with no stack the stack fixture fails them with its own message."""
    marked = [item for item in items if item.get_closest_marker(marker)]
    if not marked:
        return marked, None
    try:
        return marked, read_state()
    except RuntimeError:
        return marked, None


def _skip_snapshots_where_the_servers_take_none(items: list[pytest.Item]) -> None:
    """A test that takes a snapshot is skipped, with the server's answer, when the stack's
    servers cannot take one: a local cluster started without a snapshot registry."""
    marked, state = _marked_with_state(items, "needs_snapshots")
    if state is not None and not state.snapshots:
        for item in marked:
            why = kubernetes_selection.NO_SNAPSHOT_REGISTRY
            item.add_marker(pytest.mark.skip(reason=f"no snapshots: {why}"))


def _skip_stand_in_only_tests_on_named_images(items: list[pytest.Item]) -> None:
    """A test that needs a behaviour only our stand-in has is skipped, saying so, when the stack
    runs a named image (the real execd, say) in that role; every other test runs on both."""
    marked, state = _marked_with_state(items, "stand_in_only")
    if state is None:
        return
    for item in marked:
        marker = item.get_closest_marker("stand_in_only")
        role = marker.args[0] if marker.args else "execd"
        if state.runs_named(role):
            why = marker.kwargs.get("reason", "it needs a test-only behaviour of our stand-in")
            item.add_marker(
                pytest.mark.skip(
                    reason=f"stand_in_only({role}): {why}; the stack's {role} is the named "
                    f"image {state.images[role]}"
                )
            )


@pytest.fixture(scope="session")
def stack() -> StackState:
    """The running stack; a test that needs it fails (never skips) when it is not up."""
    try:
        state = read_state()
    except RuntimeError as error:
        pytest.fail(str(error))
    for server in state.servers.values():
        _wait_until_healthy(server)
    return state


def _wait_until_healthy(server: ServerInfo) -> None:
    # Patient enough to ride out `make stack-restart` (a few seconds), then a clear failure.
    deadline = time.monotonic() + HEALTH_WAIT_SECONDS
    while True:
        try:
            urllib.request.urlopen(f"http://{server.domain}/health", timeout=5).close()
            return
        except (urllib.error.URLError, OSError) as error:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"The {server.name!r} OpenSandbox server of the stack does not answer on "
                    f"{server.domain} ({error}). Start the stack with `make stack-up`."
                )
            time.sleep(0.5)


@pytest.fixture(scope="session")
def plain_server(stack: StackState) -> ServerInfo:
    """The server without an egress sidecar: it refuses network policies."""
    return stack.servers["plain"]


@pytest.fixture(scope="session")
def dns_server(stack: StackState) -> ServerInfo:
    """The server whose egress sidecar filters names only."""
    return stack.servers["dns"]


@pytest.fixture(scope="session")
def dns_nft_server(stack: StackState) -> ServerInfo:
    """The server whose egress sidecar filters names and addresses."""
    return stack.servers["dns+nft"]
