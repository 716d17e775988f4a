"""OpenSandboxOperator as a Dag author meets it, before anything runs."""

from __future__ import annotations

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from opensandbox_provider.operators._command_end import CommandEnd
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator, _tail
from opensandbox_provider.pool import WarmPool
from opensandbox_provider.sandbox import NamedVolume


def test_a_mistake_in_the_sandboxs_arguments_fails_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match="sandbox_timeout must be at least 60"):
        OpenSandboxOperator(task_id="t", command="true", sandbox_timeout=10)
    with pytest.raises(ValueError, match="workdir must be an absolute path"):
        OpenSandboxOperator(task_id="t", command="true", workdir="relative")


def test_egress_is_denied_unless_the_spec_opens_it() -> None:
    assert OpenSandboxOperator(task_id="t", command="true").spec.block_network is True


def test_the_snapshot_rendered_at_run_time_is_the_one_the_sandbox_starts_from() -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", snapshot="{{ prepared }}")
    operator.render_template_fields({"prepared": "snap-1"})

    assert operator.new_backend().snapshot == "snap-1"


def test_volumes_reach_the_backend_read_only_by_default() -> None:
    operator = OpenSandboxOperator(
        task_id="t", command="true", volumes=[NamedVolume("data", "/data")]
    )

    assert operator.new_backend().volumes == (NamedVolume("data", "/data", read_only=True),)


def test_skip_on_exit_code_is_99_as_for_bash_and_takes_one_code_many_or_none() -> None:
    assert OpenSandboxOperator(task_id="a", command="true").skip_on_exit_code == {99}
    assert OpenSandboxOperator(
        task_id="b", command="true", skip_on_exit_code=3
    ).skip_on_exit_code == {3}
    many = OpenSandboxOperator(task_id="c", command="true", skip_on_exit_code=[1, 2])
    assert many.skip_on_exit_code == {1, 2}
    none = OpenSandboxOperator(task_id="d", command="true", skip_on_exit_code=None)
    assert none.skip_on_exit_code == frozenset()


def test_the_default_of_deferrable_is_airflows_default_deferrable() -> None:
    import inspect

    from airflow.providers.common.compat.sdk import conf

    default = inspect.signature(OpenSandboxOperator.__init__).parameters["deferrable"].default
    assert default is conf.getboolean("operators", "default_deferrable", fallback=False)


def test_a_failure_quotes_the_last_twenty_lines_of_stderr() -> None:
    stderr = "".join(f"line {n}\n" for n in range(1, 31))
    end = CommandEnd(exit_code=1, stdout="", stderr=stderr, timed_out=False)
    quoted = _tail(end)
    assert quoted.startswith(" The last lines of its stderr:\nline 11\n")
    assert quoted.endswith("line 30") and "line 10\n" not in quoted


def test_a_failure_with_nothing_on_stderr_says_so() -> None:
    end = CommandEnd(exit_code=1, stdout="x", stderr="", timed_out=False)
    assert _tail(end) == " It printed nothing to stderr."


def test_an_open_spec_is_kept_as_given() -> None:
    spec = SandboxSpec(block_network=False, env={"A": "1"})
    assert OpenSandboxOperator(task_id="t", command="true", spec=spec).spec is spec


def test_a_warm_pool_reaches_the_backend_of_every_run() -> None:
    pool = WarmPool("py", 1, "redis://localhost:6379/0")
    operator = OpenSandboxOperator(task_id="t", command="true", warm_pool=pool)

    assert operator.new_backend().warm_pool is pool
    # Not Airflow's own slot pool, which every task has.
    assert operator.pool == "default_pool"
