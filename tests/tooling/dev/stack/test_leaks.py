"""The topology's leftover check (dev/stack/leaks.py, tests/topology/leftovers.py) counts one
Airflow run's sandboxes only, driven with a fake ``docker ps``."""

from __future__ import annotations

import subprocess

import pytest

from dev.stack import leaks
from opensandbox_provider._identity import TaskInstanceIdentity, identity_metadata

RUN_ID = "demo__20260101T000000__opensandbox_fanout"
OURS = identity_metadata({"dag_id": "opensandbox_fanout", "run_id": RUN_ID})
# The engine: (name, labels) of every container on it.
ENGINE = [
    ("ours-1", {"opensandbox.io/id": "s1", **OURS}),
    ("ours-1-egress", {"opensandbox.io/egress-sidecar-for": "s1"}),
    ("ours-2", {"opensandbox.io/id": "s2", **OURS}),
    # Another worker's sandboxes: another run of the same Dag, and one made outside Airflow.
    ("theirs-1", {"opensandbox.io/id": "s3", **OURS, "airflow-run-id": "other-run"}),
    ("theirs-1-egress", {"opensandbox.io/egress-sidecar-for": "s3"}),
    ("theirs-2", {"opensandbox.io/id": "s4"}),
]


def fake_docker(argv: list[str], **_: object) -> subprocess.CompletedProcess:
    """``docker ps -a --filter label=K[=V] ... --format '{{.Names}}\\t{{.Label "L"}}'``."""
    assert argv[:3] == ["docker", "ps", "-a"], argv
    filters = [argv[i + 1].removeprefix("label=") for i, a in enumerate(argv) if a == "--filter"]
    shown = argv[argv.index("--format") + 1].split('"')[1]
    rows = []
    for name, labels in ENGINE:
        wanted = (f.partition("=") for f in filters)
        if all(k in labels and (not eq or labels[k] == v) for k, eq, v in wanted):
            rows.append(f"{name}\t{labels.get(shown, '')}\n")
    return subprocess.CompletedProcess(argv, 0, stdout="".join(rows))


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leaks.subprocess, "run", fake_docker)


def test_a_runs_sandboxes_and_their_sidecars_are_counted_and_no_other_container() -> None:
    assert leaks.sandbox_containers(OURS) == {
        leaks.Resource("container", name) for name in ("ours-1", "ours-1-egress", "ours-2")
    }


def test_the_leftovers_of_a_run_whose_sandboxes_are_gone_are_none_whatever_else_runs() -> None:
    others = [row for row in ENGINE if not row[0].startswith("ours")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(__name__ + ".ENGINE", others)
        assert leaks.leftovers_of(OURS) == []


def test_the_labels_filtered_on_are_among_those_a_task_stamps_on_its_sandboxes() -> None:
    stamped = TaskInstanceIdentity("opensandbox_fanout", "operator", RUN_ID, 3, 1).metadata()
    assert OURS.items() <= stamped.items()
    assert set(OURS) == {"airflow-dag-id", "airflow-run-id"}
