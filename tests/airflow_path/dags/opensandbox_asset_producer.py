"""An operator that reads a stored file and whose output is an asset, and a Dag scheduled on
that asset: the asset event the operator's success records starts the consumer."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Asset, dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

PRODUCER = "opensandbox_asset_producer"
CONSUMER = "opensandbox_asset_consumer"
CONSUMED = "opensandbox asset consumer read"


def report_path(home: Path) -> Path:
    """Under the Airflow home, which the dag-processor and the worker share here; an asset is
    a fixed name, so the path is too."""
    return home / "assets" / "report.csv"


def letters_path(home: Path) -> Path:
    """The stored file the operator copies in, which the test writes before the run."""
    return home / "assets" / "letters.csv"


HOME = Path(os.environ.get("AIRFLOW_HOME", ".")).resolve()
REPORT = report_path(HOME)
REPORT_ASSET = Asset(uri=f"file://{REPORT}", name="opensandbox_report")
LETTERS_ASSET = Asset(uri=f"file://{letters_path(HOME)}", name="opensandbox_letters")


@dag(PRODUCER, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_asset_producer():
    OpenSandboxOperator(
        task_id="write_report",
        # The plain server has no egress sidecar to enforce a denial with.
        spec=SandboxSpec(block_network=False),
        command="{ printf 'letter,count\\n'; cat letters.csv; } > report.csv",
        workdir="/workspace",
        files={"letters.csv": LETTERS_ASSET},
        outputs={"report.csv": REPORT_ASSET},
    )


@dag(CONSUMER, schedule=[REPORT_ASSET], start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_asset_consumer():
    @task
    def read_report() -> str:
        text = REPORT.read_text()
        print(CONSUMED, text.splitlines()[-1])
        return text

    read_report()


opensandbox_asset_producer()
opensandbox_asset_consumer()
