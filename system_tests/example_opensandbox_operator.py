"""
System test: ``OpenSandboxOperator`` and ``@task.opensandbox``, with no agent.

A sandbox for each task, destroyed when it ends: a script file of the
Dag's (``scripts/count_words.sh``, rendered as a template) in a templated image, with a secret
in ``private_env``, whose JSON result is the task's XCom (``xcom_path``) and is copied out as an
asset (``outputs``); a decorated function that imports a package its ``requirements`` install
once into a prepared environment; and a long command that waits in the triggerer
(``deferrable=True``) while its output reaches the task log; and one command twice, in a
sandbox created for it and in one taken from a warm pool, whose task logs show what each
waited for its first command. The last task's last log line is
``opensandbox operator e2e passed``.

Needs an ``opensandbox_default`` connection (type ``opensandbox``) to an OpenSandbox server;
``make demo`` creates one for the local stack. The requirements come from the local stack's
package index; set ``OPENSANDBOX_PACKAGE_INDEX`` to a ``--find-links`` page of your own that
holds ``osb-demo-words`` to run it elsewhere. The warm pool's state is in the Redis
``OPENSANDBOX_POOL_STORE`` names (the local stack's by default); ``make demo`` keeps the pool
filled while it runs the Dag, and without a keeper the pooled task creates its sandbox as
the other one does. Run it with
``airflow dags test example_opensandbox_operator`` or trigger it from the UI.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Asset, dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.pool import WarmPool

DAG_ID = "example_opensandbox_operator"
PASSED = "opensandbox operator e2e passed"
# Egress is denied by default, which needs a server with the egress sidecar; the local
# stack's default server has none, so these sandboxes are opened. Drop it on a server that
# has one and they run with no network at all.
OPEN = SandboxSpec(block_network=False)
# The Dag's script files, found through template_searchpath wherever the Dag file is linked.
SCRIPTS = Path(__file__).resolve().parent / "scripts"
# Not a secret: it shows how one is masked.
DEMO_TOKEN = "demo-token-3f9a1c"
# Where the word counts land, as an asset a Dag could be scheduled on.
AIRFLOW_HOME = Path(os.environ.get("AIRFLOW_HOME", "~/airflow")).expanduser().resolve()
COUNTS = Asset(
    uri=f"file://{AIRFLOW_HOME / 'opensandbox-demo' / 'counts.json'}",
    name="opensandbox_demo_word_counts",
)
PACKAGE_INDEX = os.environ.get("OPENSANDBOX_PACKAGE_INDEX", "http://allowed.test:18097/")
REQUIREMENTS = ["osb-demo-words==1.0"]
PIP_ARGS = [
    "--no-index",
    "--find-links",
    PACKAGE_INDEX,
    "--trusted-host",
    urlsplit(PACKAGE_INDEX).hostname or "",
]
# One ready sandbox made as warm_start asks for one. make demo runs its keeper,
# ``python -m opensandbox_provider.pool keep example_opensandbox_operator:WARM``.
WARM = WarmPool(
    "example-operator",
    size=1,
    store=os.environ.get("OPENSANDBOX_POOL_STORE", "redis://127.0.0.1:18099/0"),
    spec=OPEN,
    # Short, so that a pool whose keeper was killed empties soon by itself.
    idle_lease=300,
)
FIRST_COMMAND = "echo first command"

log = logging.getLogger(DAG_ID)


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    tags=["opensandbox"],
    template_searchpath=[str(SCRIPTS)],
)
def example_opensandbox_operator():
    script = OpenSandboxOperator(
        task_id="run_script",
        spec=OPEN,
        image="{{ params.image }}",
        workdir="/srv/job",
        command="count_words.sh",
        private_env={"API_TOKEN": DEMO_TOKEN},
        xcom_path="counts.json",
        outputs={"counts.json": COUNTS},
        params={"words": "alpha beta gamma", "image": "python:3.12-slim"},
    )

    @task.opensandbox(spec=OPEN, requirements=REQUIREMENTS, pip_args=PIP_ARGS, setup_spec=OPEN)
    def letter_counts(words: str) -> dict:
        import osb_demo_words

        return osb_demo_words.letter_counts(words)

    long_command = OpenSandboxOperator(
        task_id="long_command",
        spec=OPEN,
        deferrable=True,
        poll_interval=0.5,
        command="for i in 1 2 3; do echo tick $i; sleep 1; done",
    )

    # The same command, in a sandbox created for it and in one taken from the warm pool.
    OpenSandboxOperator(task_id="cold_start", spec=OPEN, command=FIRST_COMMAND)
    OpenSandboxOperator(task_id="warm_start", spec=OPEN, warm_pool=WARM, command=FIRST_COMMAND)

    @task
    def check(script_result: dict, counts: dict, long_result: dict) -> None:
        assert script_result == {"words": 3}, script_result
        assert counts == {"alpha": 5, "beta": 4, "gamma": 5}, counts
        assert long_result["stdout"].startswith("tick 1\ntick 2\ntick 3\n"), long_result
        log.info(PASSED)

    check(script.output, letter_counts("alpha beta gamma"), long_command.output)


example_opensandbox_operator()
