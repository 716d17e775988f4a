"""What OpenSandboxOperator renders, as a task renders it, and what it keeps out of sight."""

from __future__ import annotations

import json
import runpy
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import ObjectStoragePath, dag, redact

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from tests.unit.airflow_versions import forget_masked_values, task_masker

# What a task's context holds that these templates use; a task renders with Airflow's own
# Jinja environment, the Dag's, which the tests take from a real Dag as a task does.
CONTEXT: dict[str, Any] = {"ds": "2026-01-02", "ds_nodash": "20260102", "params": {}}
SECRET = "s3cr3t-token-never-shown"


def in_a_dag(**arguments: Any) -> OpenSandboxOperator:
    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        OpenSandboxOperator(task_id="t", **arguments)

    return holder().task_dict["t"]


def rendered(operator: OpenSandboxOperator, **context: Any) -> OpenSandboxOperator:
    operator.render_template_fields({**CONTEXT, **context})
    return operator


@pytest.fixture
def masker():
    """Airflow's log masker as a task has it; the secrets a test masks are taken back."""
    masker = task_masker()
    patterns, replacer = masker.patterns, masker.replacer
    forget_masked_values(masker)
    yield masker
    masker.patterns, masker.replacer = patterns, replacer


def test_the_sandboxs_settings_are_templated_as_are_command_env_files_and_outputs() -> None:
    assert set(OpenSandboxOperator.template_fields) == {
        "command",
        "env",
        "files",
        "outputs",
        "snapshot",
        "image",
        "cpu",
        "memory",
        "cpu_request",
        "memory_request",
        "workdir",
    }


def test_image_cpu_memory_and_workdir_are_read_once_rendered() -> None:
    operator = in_a_dag(
        command="true",
        image="{{ params.image }}",
        cpu="{{ params.cpu }}",
        memory="{{ params.memory }}",
        workdir="/srv/{{ ds_nodash }}",
    )
    rendered(operator, params={"image": "python:3.13-slim", "cpu": "500m", "memory": "1Gi"})

    backend = operator.new_backend()
    assert (backend.image, backend.cpu, backend.memory) == ("python:3.13-slim", "500m", "1Gi")
    assert backend.workdir == "/srv/20260102"


def test_a_templated_value_is_checked_once_rendered_and_a_plain_one_at_parse_time() -> None:
    operator = in_a_dag(command="true", workdir="{{ params.workdir }}", memory="{{ params.m }}")
    rendered(operator, params={"workdir": "relative/dir", "m": "1Gi"})
    with pytest.raises(ValueError, match="workdir must be an absolute path"):
        operator.new_backend()
    with pytest.raises(ValueError, match="memory must be a non-empty string"):
        in_a_dag(command="true", workdir="{{ params.workdir }}", memory="")


def test_both_sides_of_outputs_and_of_files_are_rendered() -> None:
    source = ObjectStoragePath("file:///data/{{ ds }}/input.csv")
    operator = in_a_dag(
        command="true",
        files={"in/{{ ds }}.txt": "day {{ ds }}", "input.csv": source, "raw.bin": b"{{ ds }}"},
        outputs={
            "r_{{ ds_nodash }}.csv": "s3://b/{{ ds }}/r.csv",
            # Paths, so never read as a script file's name despite their ending.
            "job.sh": "file:///out/{{ ds }}/job.sh",
            "log.txt": ObjectStoragePath("file:///out/{{ ds }}/log.txt"),
        },
    )
    rendered(operator)

    assert operator.files["in/2026-01-02.txt"] == "day 2026-01-02"
    assert operator.files["raw.bin"] == b"{{ ds }}"
    assert isinstance(operator.files["input.csv"], ObjectStoragePath)
    assert operator.outputs["r_20260102.csv"] == "s3://b/2026-01-02/r.csv"
    assert operator.outputs["job.sh"] == "file:///out/2026-01-02/job.sh"
    log = operator.outputs["log.txt"]
    assert isinstance(log, ObjectStoragePath) and "{{" not in str(log)


def test_a_command_naming_a_script_in_the_dag_folder_runs_its_rendered_text(tmp_path) -> None:
    folder = tmp_path / "dags"
    (folder / "scripts").mkdir(parents=True)
    (folder / "report.sh").write_text('echo "report for {{ ds }}"\n')
    (folder / "scripts" / "clean.bash").write_text("rm -rf /tmp/{{ ds_nodash }}\n")
    searched = tmp_path / "shared"
    searched.mkdir()
    (searched / "shared.sh").write_text("echo shared {{ ds }}\n")
    (folder / "job.py").write_text(
        "from datetime import datetime\n"
        "from airflow.providers.common.compat.sdk import DAG\n"
        "from opensandbox_provider.operators.opensandbox import OpenSandboxOperator\n"
        f"with DAG('job', schedule=None, start_date=datetime(2026, 1, 1),"
        f" template_searchpath=[{str(searched)!r}]) as job:\n"
        "    OpenSandboxOperator(task_id='report', command='report.sh')\n"
        "    OpenSandboxOperator(task_id='clean', command='scripts/clean.bash')\n"
        "    OpenSandboxOperator(task_id='shared', command='shared.sh')\n"
        "    OpenSandboxOperator(task_id='inline', command='echo {{ ds }}')\n"
        "    OpenSandboxOperator(task_id='runs_one', command='sh /srv/{{ ds_nodash }}/report.sh')\n"
        "    OpenSandboxOperator(task_id='in_image', command='bash /opt/job/run.sh')\n"
    )
    job = runpy.run_path(str(folder / "job.py"))["job"]
    # As the Dag processor does once it has parsed the file.
    job.resolve_template_files()
    assert job.task_dict["report"].command == 'echo "report for {{ ds }}"\n'
    assert job.task_dict["in_image"].command == "bash /opt/job/run.sh"

    commands = {task_id: rendered(task).command for task_id, task in job.task_dict.items()}
    assert commands == {
        "report": 'echo "report for 2026-01-02"',
        "clean": "rm -rf /tmp/20260102",
        "shared": "echo shared 2026-01-02",
        "inline": "echo 2026-01-02",
        # Commands that end like a script file's name, run as the commands they are.
        "runs_one": "sh /srv/20260102/report.sh",
        "in_image": "bash /opt/job/run.sh",
    }


def test_private_env_reaches_the_sandbox_but_no_rendered_field_and_is_masked(masker) -> None:
    operator = in_a_dag(
        command="echo $TOKEN",
        env={"RUN": "{{ ds }}"},
        private_env={"TOKEN": "{{ params.token }}"},
    )
    rendered(operator, params={"token": SECRET})

    assert operator._sandbox_spec().env == {"RUN": "2026-01-02", "TOKEN": SECRET}
    assert "private_env" not in operator.template_fields
    shown = json.dumps({field: getattr(operator, field) for field in operator.template_fields})
    assert SECRET not in shown
    # What the task log and the returned stdout go through.
    assert redact(f"the token is {SECRET}") == "the token is ***"


@pytest.mark.airflow_at_least(
    "3.0", reason="the context it builds is the one Airflow 3's unmapping reads (2 reads run_id)"
)
def test_a_mapped_task_renders_its_paths_and_private_env_as_a_plain_one_does(masker) -> None:
    @dag(schedule=None, start_date=datetime(2026, 1, 1), params={"token": SECRET})
    def holder() -> None:
        OpenSandboxOperator.partial(
            task_id="m", command="true", private_env={"TOKEN": "{{ params.token }}"}
        ).expand(outputs=[{"r_{{ ds }}.csv": "s3://b/{{ ds }}/r.csv"}, {"x.csv": "s3://b/x"}])

    mapped = holder().task_dict["m"]
    # What a task's context holds that unmapping reads: the Dag, its run, the instance.
    context: dict[str, Any] = {
        **CONTEXT,
        "dag": mapped.dag,
        "dag_run": SimpleNamespace(conf={}),
        "ti": SimpleNamespace(map_index=0),
    }
    mapped.render_template_fields(context)
    unmapped = context["task"]

    assert unmapped.outputs == {"r_2026-01-02.csv": "s3://b/2026-01-02/r.csv"}
    assert unmapped.private_env == {"TOKEN": SECRET}
    assert redact(SECRET) == "***"
