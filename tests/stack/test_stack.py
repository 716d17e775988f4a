"""The local stack is what the suite takes it for: real servers, local images, our resolver.

Every test goes through the real ``opensandbox`` SDK to a real server, and checks the outcome on
the Docker engine itself where the SDK cannot see it.
"""

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException
from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule

from dev.stack.state import ServerInfo, StackState
from tests.containers import containers_of

SERVERS = ["plain", "dns", "dns+nft"]


@contextmanager
def sandbox(server: ServerInfo, **options) -> Iterator[SandboxSync]:
    sb = SandboxSync.create(
        "python:3.12-slim", connection_config=server.connection_config(), **options
    )
    try:
        yield sb
    finally:
        _destroy_unless_gone(sb)


def _destroy_unless_gone(sb: SandboxSync) -> None:
    try:
        sb.destroy()
    except SandboxApiException as error:
        if error.status_code != 404:
            raise


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.mark.parametrize("name", SERVERS)
def test_every_server_is_healthy_and_is_opensandbox_1_1_1(stack: StackState, name: str):
    server = stack.servers[name]

    assert get_json(f"http://{server.domain}/health") == {"status": "healthy"}
    assert get_json(f"http://{server.domain}/version") == {"version": "1.1.1"}


def test_the_stacks_redis_answers_where_the_state_says_and_on_the_bridge(stack: StackState):
    # The stack's Redis holds the pools of `make demo` and of deployments tried on the stack;
    # the tests keep theirs in a Redis of their own.
    from redis import Redis

    assert stack.redis_url, "The stack names no Redis: restart it with `make stack-up`."
    assert Redis.from_url(stack.redis_url, socket_timeout=5).ping()
    port = Redis.from_url(stack.redis_url).connection_pool.connection_kwargs["port"]
    assert Redis(host=stack.bridge_ip, port=port, socket_timeout=5).ping()


def test_a_wrong_api_key_is_refused_with_401(plain_server: ServerInfo):
    config = plain_server.connection_config(api_key="not-the-key")

    with pytest.raises(SandboxApiException) as refused:
        SandboxSync.create("python:3.12-slim", connection_config=config)

    assert refused.value.status_code == 401
    assert refused.value.error.code == "INVALID_API_KEY"


@pytest.mark.parametrize("name", SERVERS)
def test_a_sandbox_runs_the_local_image_and_is_gone_after_destroy(stack: StackState, name: str):
    with sandbox(stack.servers[name]) as sb:
        (container,) = containers_of(sb.id)
        image = docker("inspect", "--format", "{{.Image}}", container).strip()
        assert (
            image == docker("image", "inspect", "--format", "{{.Id}}", stack.sandbox_image).strip()
        )
        assert sb.get_info().status.state == "Running"
        assert sb.is_healthy()
        sb.destroy()

        assert containers_of(sb.id) == []


def test_destroying_a_sandbox_twice_answers_404(plain_server: ServerInfo):
    with sandbox(plain_server) as sb:
        sb.destroy()

        with pytest.raises(SandboxApiException) as second:
            sb.destroy()

    assert second.value.status_code == 404
    assert second.value.error.code == "DOCKER::SANDBOX_NOT_FOUND"


def test_a_network_policy_is_refused_by_a_server_without_egress(plain_server: ServerInfo):
    policy = NetworkPolicy(
        defaultAction="deny", egress=[NetworkRule(action="allow", target="allowed.test")]
    )

    with pytest.raises(SandboxApiException) as refused:
        SandboxSync.create(
            "python:3.12-slim",
            network_policy=policy,
            connection_config=plain_server.connection_config(),
        )

    assert refused.value.status_code == 400
    assert refused.value.error.code == "SANDBOX::INVALID_PARAMETER"
    assert refused.value.error.message == (
        "egress.image must be configured when networkPolicy is provided."
    )


@pytest.mark.parametrize("name", SERVERS)
def test_sandboxes_resolve_names_only_through_our_resolver(stack: StackState, name: str):
    with sandbox(stack.servers[name]) as sb:
        (container,) = containers_of(sb.id)
        resolv_conf = docker("exec", container, "cat", "/etc/resolv.conf")

    nameservers = [
        line.split()[1] for line in resolv_conf.splitlines() if line.startswith("nameserver")
    ]
    assert nameservers == [stack.resolver["host"]]


# That the server's expiry removes a sandbox's container is proven by
# tests/integration/test_lease.py, whose killed worker's sandbox must be gone from the server
# and from the Docker engine within one lease.


@pytest.fixture(scope="module")
def labelled(stack: StackState) -> Iterator[SandboxSync]:
    """One sandbox for all metadata tests; each of them uses keys of its own."""
    with sandbox(stack.servers["plain"], metadata={"team": "stack", "run": "r1"}) as sb:
        yield sb


class TestMetadata:
    """Sandbox metadata follows Kubernetes label rules; PATCH merges, and None deletes a key."""

    def test_create_time_metadata_reads_back(self, labelled: SandboxSync):
        metadata = labelled.get_info().metadata

        assert metadata["team"] == "stack"
        assert metadata["run"] == "r1"

    def test_patch_replaces_adds_and_none_deletes(self, labelled: SandboxSync):
        labelled.patch_metadata({"replaced": "old", "deleted": "soon"})

        labelled.patch_metadata({"replaced": "new", "added": "yes", "deleted": None})

        metadata = labelled.get_info().metadata
        assert metadata["replaced"] == "new"
        assert metadata["added"] == "yes"
        assert "deleted" not in metadata
        assert metadata["team"] == "stack", "a key the patch does not name is kept"

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("my_key", "my_value"),
            ("a.b.c", "v-1"),
            ("UPPER", "VALUE"),
            ("example.com/team", "x"),
            ("k" * 63, "v" * 63),
            ("empty", ""),
        ],
    )
    def test_label_shaped_metadata_is_accepted(self, labelled: SandboxSync, key: str, value: str):
        labelled.patch_metadata({key: value})

        assert labelled.get_info().metadata[key] == value

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("spaces", "a b"),
            ("slash", "a/b"),
            ("colon", "a:b"),
            ("leading-dash", "-ab"),
            ("accent", "café"),
            ("too-long", "v" * 64),
            ("bad_prefix/team", "x"),
            ("a.com/b/c", "x"),
            ("_k", "x"),
            ("k" * 64, "x"),
        ],
    )
    def test_metadata_outside_label_rules_is_refused(
        self, labelled: SandboxSync, key: str, value: str
    ):
        with pytest.raises(SandboxApiException) as refused:
            labelled.patch_metadata({key: value})

        assert refused.value.status_code == 400
        assert refused.value.error.code == "SANDBOX::INVALID_METADATA_LABEL"
        assert key not in labelled.get_info().metadata

    def test_the_reserved_prefix_is_refused(self, labelled: SandboxSync):
        with pytest.raises(SandboxApiException) as refused:
            labelled.patch_metadata({"opensandbox.io/foo": "x"})

        assert refused.value.status_code == 400
        assert refused.value.error.code == "INVALID_METADATA_LABEL"


def test_the_stacks_package_index_serves_the_demo_wheel_on_the_bridge(stack: StackState):
    """Where ``wheelhouse.pip_args`` points sandboxes: the bridge, as ``allowed.test``."""
    import httpx

    from dev.stack import wheelhouse
    from dev.stack.resolver import ALLOWED_NAME

    assert stack.resolver["zone"][ALLOWED_NAME] == stack.bridge_ip
    page = httpx.get(f"http://{stack.bridge_ip}:{wheelhouse.PORT}/", timeout=10, trust_env=False)
    assert page.status_code == 200
    assert "osb_demo_words-1.0-py3-none-any.whl" in page.text
