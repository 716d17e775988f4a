"""A server of a test's own, restarted, leaves every other server's containers alone
(tests/engine_view.py), and still tidies up its own.

At its start an OpenSandbox server on Docker removes each egress sidecar whose sandbox
container it does not list (what another server's create in flight looks like) and ends each
sandbox whose labelled expiry has passed. Planted here on the engine directly, as another
server's, both must outlive the restart; an orphan sidecar made through the server's own view
must not, which shows the restart did tidy up.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from dev.stack.state import StackState
from tests.own_server import OwnServer

SIDECAR_FOR = "opensandbox.io/egress-sidecar-for"
SANDBOX_ID = "opensandbox.io/id"
EXPIRES_AT = "opensandbox.io/expires-at"
WAIT_SECONDS = 30.0


def docker(*args: str, host: str | None = None) -> str:
    engine = ["-H", host] if host else []
    done = subprocess.run(["docker", *engine, *args], capture_output=True, text=True)
    assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def exists(name: str) -> bool:
    listed = docker("ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.Names}}")
    return listed == name


@pytest.fixture
def planted(stack: StackState) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def plant(names: list[str], image: str, labels: dict[str, str], host: str | None = None) -> str:
    """A container that is never started, labelled as the server labels its own."""
    name = f"engine-view-{uuid.uuid4().hex[:10]}"
    flags = [f for key, value in labels.items() for f in ("--label", f"{key}={value}")]
    docker("create", "--name", name, *flags, image, "true", host=host)
    names.append(name)
    return name


def test_a_restarted_server_leaves_other_servers_containers_and_tidies_its_own(
    stack: StackState, own_server: OwnServer, planted: list[str]
) -> None:
    image = stack.images["sandbox"]
    others_sidecar = plant(planted, image, {SIDECAR_FOR: uuid.uuid4().hex})
    others_expired = plant(
        planted, image, {SANDBOX_ID: uuid.uuid4().hex, EXPIRES_AT: "2000-01-01T00:00:00+00:00"}
    )
    own_orphan = plant(planted, image, {SIDECAR_FOR: uuid.uuid4().hex}, own_server.docker_host)
    # The view lists what was made through it, and only that.
    through_view = docker("ps", "-a", "--format", "{{.Names}}", host=own_server.docker_host)
    assert own_orphan in through_view.split()
    assert others_sidecar not in through_view.split()

    own_server.kill()
    own_server.start()  # healthy once its start-up, the tidying included, is done

    assert not exists(own_orphan), "the restarted server did not remove its own orphan sidecar"
    assert exists(others_sidecar), "the restarted server removed another server's sidecar"
    assert exists(others_expired), "the restarted server ended another server's sandbox"
