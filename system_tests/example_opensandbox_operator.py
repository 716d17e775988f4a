"""
System test: ``OpenSandboxOperator`` and ``@task.opensandbox``, with no agent.

Three sandboxes, each created for its task and destroyed when it ends: a script written in
through ``files`` whose stdout is the task's XCom, a decorated function whose return value the
next task checks, and a long command that waits in the triggerer (``deferrable=True``) while
its output reaches the task log. The last task's last log line is
``opensandbox operator e2e passed``.

Needs an ``opensandbox_default`` connection (type ``opensandbox``) to an OpenSandbox server;
``make demo`` creates one for the local stack. Run it with
``airflow dags test example_opensandbox_operator`` or trigger it from the UI.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "example_opensandbox_operator"
PASSED = "opensandbox operator e2e passed"
# Egress is denied by default, which needs a server with the egress sidecar; the local
# stack's default server has none, so these sandboxes are opened. Drop it on a server that
# has one and they run with no network at all.
OPEN = SandboxSpec(block_network=False)

log = logging.getLogger(DAG_ID)


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), tags=["opensandbox"])
def example_opensandbox_operator():
    script = OpenSandboxOperator(
        task_id="run_script",
        spec=OPEN,
        workdir="/srv/job",
        files={"count.sh": "for word in {{ params.words }}; do echo $word; done | wc -l"},
        command="sh count.sh",
        params={"words": "alpha beta gamma"},
    )

    @task.opensandbox(spec=OPEN)
    def letter_counts(words: str) -> dict:
        return {word: len(word) for word in words.split()}

    long_command = OpenSandboxOperator(
        task_id="long_command",
        spec=OPEN,
        deferrable=True,
        poll_interval=0.5,
        command="for i in 1 2 3; do echo tick $i; sleep 1; done",
    )

    @task
    def check(script_result: dict, counts: dict, long_result: dict) -> None:
        assert script_result == {"exit_code": 0, "stdout": "3\n"}, script_result
        assert counts == {"alpha": 5, "beta": 4, "gamma": 5}, counts
        assert long_result["stdout"].startswith("tick 1\ntick 2\ntick 3\n"), long_result
        log.info(PASSED)

    check(script.output, letter_counts("alpha beta gamma"), long_command.output)


example_opensandbox_operator()
