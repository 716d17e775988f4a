"""Warm pools without a server: what a pool is, what counts as the same sandbox, and the
fallbacks that never reach the server."""

from __future__ import annotations

import copy
import logging
import sys

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from opensandbox.exceptions import PoolStateStoreUnavailableException
from opensandbox.pool import InMemoryPoolStateStore

from dev.stack import redis
from opensandbox_provider.pool import WarmPool, _draw
from opensandbox_provider.pool.__main__ import load, main
from opensandbox_provider.pool._definition import FINGERPRINT_KEY, POOL_KEY, CreationArguments
from opensandbox_provider.pool._store import state_store
from opensandbox_provider.sandbox import HostPath, NamedVolume, OpenSandboxBackend

STORE = "redis://localhost:6379/0"
OPEN = SandboxSpec(block_network=False)


def arguments(**changes) -> CreationArguments:
    settings = dict(
        image="python:3.12-slim",
        snapshot=None,
        cpu="1",
        memory="2Gi",
        spec=OPEN,
        volumes=(),
    )
    settings.update(changes)
    return CreationArguments.of(**settings)


@pytest.mark.parametrize(
    "change",
    [
        {"image": "python:3.13-slim"},
        {"snapshot": "snap-1"},
        {"cpu": "500m"},
        {"memory": "1Gi"},
        {"spec": SandboxSpec(block_network=False, env={"A": "1"})},
        {"spec": SandboxSpec()},
        {"spec": SandboxSpec(allow_egress_to=["packages.example.internal"])},
        {"volumes": (NamedVolume("data", "/data"),)},
        {"volumes": (HostPath("/srv/data", "/data"),)},
    ],
    ids=str,
)
def test_each_creation_argument_makes_another_kind_of_sandbox(change) -> None:
    base, changed = arguments(), arguments(**change)
    assert changed.fingerprint() != base.fingerprint()
    assert base.differences(changed) != []


def test_the_same_arguments_make_the_same_fingerprint_in_any_order() -> None:
    one = arguments(spec=SandboxSpec(block_network=False, env={"A": "1", "B": "2"}))
    other = arguments(spec=SandboxSpec(block_network=False, env={"B": "2", "A": "1"}))
    assert one.fingerprint() == other.fingerprint()
    assert one.differences(other) == []


def test_an_open_spec_and_no_spec_make_the_same_sandbox() -> None:
    # Neither sends a network policy, so the sandboxes cannot be told apart.
    assert arguments(spec=None).fingerprint() == arguments(spec=OPEN).fingerprint()


def test_a_snapshot_replaces_the_image_in_what_counts() -> None:
    assert (
        arguments(snapshot="snap-1", image="a").fingerprint()
        == arguments(snapshot="snap-1", image="b").fingerprint()
    )


def test_differences_name_environment_variables_but_never_their_values() -> None:
    said = arguments(spec=SandboxSpec(block_network=False, env={"TOKEN": "s3cret"})).differences(
        arguments()
    )
    assert said == ["env (names ['TOKEN'] against [])"]
    assert "s3cret" not in " ".join(said)


def test_a_backend_with_the_pools_arguments_wants_what_the_pool_holds() -> None:
    pool = WarmPool(
        "py", 1, STORE, cpu="500m", spec=SandboxSpec(allow_egress_to=["packages.example.internal"])
    )
    backend = OpenSandboxBackend(cpu="500m", warm_pool=pool)
    wanted = CreationArguments.of_template(
        backend.creation_template(SandboxSpec(allow_egress_to=["packages.example.internal"]))
    )
    assert wanted.fingerprint() == pool.creation.fingerprint()


@pytest.mark.parametrize(
    ("arguments_", "message"),
    [
        ({"name": "Not_A_Label"}, "lowercase letters"),
        ({"name": "x" * 41}, "at most 40"),
        ({"size": -1}, "whole number"),
        ({"size": True}, "whole number"),
        ({"store": " "}, "Redis URL"),
        ({"idle_lease": 30}, "at least 60"),
        ({"when_empty": "wait"}, "'cold' or 'fail'"),
        ({"on_mismatch": "retry"}, "'cold' or 'fail'"),
        ({"spec": SandboxSpec(owner="dag/run")}, "cannot have an owner"),
        ({"cpu": ""}, "cpu must be"),
    ],
)
def test_a_pool_refuses_what_could_never_serve_a_task(arguments_, message) -> None:
    settings = {"name": "py", "size": 1, "store": STORE, **arguments_}
    with pytest.raises(ValueError, match=message):
        WarmPool(**settings)


def test_a_pool_is_shared_not_copied_when_airflow_copies_its_task() -> None:
    store = InMemoryPoolStateStore()
    pool = WarmPool("py", 1, store)
    backend = copy.deepcopy(OpenSandboxBackend(warm_pool=pool))
    assert backend.warm_pool is pool


def test_the_store_url_stays_out_of_the_pools_repr() -> None:
    assert "s3cret" not in repr(WarmPool("py", 1, "redis://:s3cret@localhost:6379/0"))


def test_idle_sandboxes_carry_the_pool_and_its_fingerprint() -> None:
    pool = WarmPool("py", 1, STORE)
    metadata = pool.idle_metadata()
    assert metadata[POOL_KEY] == "py"
    assert metadata[FINGERPRINT_KEY] == pool.creation.fingerprint()
    assert metadata["created-by"] == "airflow"


class RefusingStore:
    """A store that fails every call, as Redis does when it cannot be reached."""

    def __getattr__(self, name: str):
        def refuse(*args, **kwargs):
            raise PoolStateStoreUnavailableException("Connection refused")

        return refuse


class UntouchableLifecycle:
    """Any call to the server fails the test: these draws must end before reaching it."""

    def call(self, doing: str):
        raise AssertionError(f"the draw reached the server to {doing}")


def draw(pool: WarmPool, wanted: CreationArguments | None = None, conn_id: str | None = None):
    return _draw.draw(
        pool,
        wanted=pool.creation if wanted is None else wanted,
        conn_id=pool.opensandbox_conn_id if conn_id is None else conn_id,
        handover=_draw.Handover(
            lifecycle=UntouchableLifecycle(),  # type: ignore[arg-type]
            config=None,  # type: ignore[arg-type]
            metadata={},
            lease=3600,
            connect_timeout=10,
        ),
    )


def test_an_empty_pool_tells_the_backend_to_create_cold(caplog) -> None:
    caplog.set_level(logging.WARNING)
    assert draw(WarmPool("py", 1, InMemoryPoolStateStore())) is None
    assert "Not taking a sandbox from warm pool py: it has no idle sandbox" in caplog.text


def test_an_empty_pool_that_says_fail_fails_the_task() -> None:
    with pytest.raises(SandboxTerminalError, match="it has no idle sandbox.*when_empty='fail'"):
        draw(WarmPool("py", 1, InMemoryPoolStateStore(), when_empty="fail"))


@pytest.mark.parametrize("when_empty", ["cold", "fail"])
def test_a_store_that_cannot_be_reached_counts_as_an_empty_pool(when_empty) -> None:
    pool = WarmPool("py", 1, RefusingStore(), when_empty=when_empty)  # type: ignore[arg-type]
    if when_empty == "cold":
        assert draw(pool) is None
    else:
        with pytest.raises(SandboxTerminalError, match="store could not be reached"):
            draw(pool)


def test_a_mismatch_never_takes_from_the_pool(caplog) -> None:
    store = InMemoryPoolStateStore()
    store.put_idle("py", "sandbox-1")
    pool = WarmPool("py", 1, store, cpu="500m")
    caplog.set_level(logging.WARNING)
    assert draw(pool, wanted=arguments(cpu="1", spec=SandboxSpec())) is None
    assert "differ from this task's in cpu ('500m' against '1')" in caplog.text
    assert store.snapshot_counters("py").idle_count == 1


def test_a_mismatch_that_says_fail_fails_the_task_and_leaves_the_pool() -> None:
    store = InMemoryPoolStateStore()
    store.put_idle("py", "sandbox-1")
    pool = WarmPool("py", 1, store, on_mismatch="fail")
    with pytest.raises(SandboxTerminalError, match="connection.*on_mismatch='fail'"):
        draw(pool, conn_id="another_server")
    assert store.snapshot_counters("py").idle_count == 1


POOL_FOR_THE_KEEPER = WarmPool("keeper-test", 2, STORE)
# Nothing listens on port 1 of loopback, so every call to this pool's Redis is refused at once.
UNREACHABLE = WarmPool("unreachable", 2, "redis://127.0.0.1:1/0")
NOT_A_POOL = "a string"


def test_the_keeper_loads_the_pool_the_dags_define() -> None:
    assert load(f"{__name__}:POOL_FOR_THE_KEEPER") is POOL_FOR_THE_KEEPER


@pytest.mark.parametrize(
    ("reference", "message"),
    [("no_colon", "module:attribute"), (f"{__name__}:NOT_A_POOL", "str, not a WarmPool")],
)
def test_the_keeper_says_what_is_wrong_with_a_reference(reference, message) -> None:
    with pytest.raises(SystemExit, match=message):
        load(reference)


def test_the_keepers_status_counts_the_pools_idle_sandboxes(tmp_path, monkeypatch, capsys) -> None:
    with redis.private(tmp_path) as url:
        pool = WarmPool("status-test", 2, url)
        state_store(pool).put_idle(pool.name, "sandbox-1")
        monkeypatch.setattr(sys.modules[__name__], "POOL_IN_REDIS", pool, raising=False)
        assert main(["status", f"{__name__}:POOL_IN_REDIS"]) == 0
    assert "Warm pool status-test: 1 of 2 idle." in capsys.readouterr().out


def test_the_keeper_says_so_when_the_pools_redis_cannot_be_reached() -> None:
    with pytest.raises(SystemExit, match="The Redis of warm pool unreachable cannot be reached"):
        main(["status", f"{__name__}:UNREACHABLE"])


# What the fingerprints of these definitions were before private_env existed: a pool defined
# without secrets keeps its fingerprint, so its keeper's idle sandboxes stay drawable across
# the upgrade.
EARLIER_FINGERPRINTS = {
    "default": "16e226f0e0dd89f74b1395efaccfd986",
    "env": "8a4afb9c762bbd17336b6ad85aa63141",
}


def test_a_pool_without_private_env_keeps_the_fingerprint_earlier_releases_gave() -> None:
    assert WarmPool("py", 1, STORE).creation.fingerprint() == EARLIER_FINGERPRINTS["default"]
    with_env = WarmPool("py", 1, STORE, spec=SandboxSpec(env={"MODE": "fast"}))
    assert with_env.creation.fingerprint() == EARLIER_FINGERPRINTS["env"]


def test_no_idle_sandboxs_metadata_carries_a_digest_of_a_private_value() -> None:
    def stamped(secret: str) -> dict[str, str]:
        pool = WarmPool(
            "py",
            1,
            STORE,
            spec=SandboxSpec(env={"MODE": "fast"}),
            private_env={"API_TOKEN": secret},
        )
        return pool.idle_metadata()

    one, other = stamped("token-one-4a1f"), stamped("token-two-9c3e")
    # The fingerprint is the same whatever the value, so it says nothing of it.
    assert one[FINGERPRINT_KEY] == other[FINGERPRINT_KEY]
    assert "token-one-4a1f" not in repr(one)
    # Naming a private variable still makes another kind of sandbox than a pool without it.
    assert one[FINGERPRINT_KEY] != EARLIER_FINGERPRINTS["env"]


def test_a_task_draws_only_with_the_pools_private_values_and_never_says_them() -> None:
    pool = WarmPool("py", 1, STORE, spec=OPEN, private_env={"API_TOKEN": "token-one-4a1f"})
    backend = OpenSandboxBackend(warm_pool=pool)
    same = CreationArguments.of_template(
        backend.creation_template(
            SandboxSpec(block_network=False, env={"API_TOKEN": "token-one-4a1f"})
        )
    )
    rotated = CreationArguments.of_template(
        backend.creation_template(SandboxSpec(block_network=False, env={"API_TOKEN": "rotated-77"}))
    )
    assert pool.creation == same
    said = pool.creation.differences(rotated)
    assert said and "token-one-4a1f" not in " ".join(said) and "rotated-77" not in " ".join(said)
    # The keeper creates the sandboxes with the private values in their environment.
    assert pool.creation.env == {"API_TOKEN": "token-one-4a1f"}


def test_private_env_without_a_spec_to_add_it_to_is_refused() -> None:
    with pytest.raises(ValueError, match="give the pool a spec"):
        WarmPool("py", 1, STORE, spec=None, private_env={"API_TOKEN": "x"})
