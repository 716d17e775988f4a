"""
``@task.opensandbox``: a Python function run in a sandbox of its own, with the image's Python.

As ``@task.docker`` does, the function's source is written into the sandbox with its
arguments, run there, and its return value read back. Arguments and the return value travel
as JSON rather than pickles, so the image's Python need not match the worker's, and nothing
the sandbox sends back is ever unpickled on the worker.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import (
    AirflowException,
    DecoratedOperator,
    mask_secret,
    task_decorator_factory,
)

from opensandbox_provider._url_secrets import url_secrets, without_url_secrets
from opensandbox_provider.decorators._requirements import (
    VENV_PYTHON,
    checked_requirements,
    set_up_commands,
)
from opensandbox_provider.operators._files import check_files
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.pool import ServerPool
from opensandbox_provider.sandbox import _arguments
from opensandbox_provider.sandbox._snapshots import prepare_snapshot

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.providers.common.ai.sandbox.base import SandboxSpec
    from airflow.providers.common.compat.sdk import Context, TaskDecorator

# Where the function, its arguments and its result live in the sandbox.
TASK_DIRECTORY = "/srv/airflow-opensandbox-task"
SCRIPT = f"{TASK_DIRECTORY}/script.py"
ARGUMENTS = f"{TASK_DIRECTORY}/arguments.json"
RESULT = f"{TASK_DIRECTORY}/result.json"
# The exit code the script ends with when the return value is not JSON: a code no Python
# exception gives, so the failure's message can say which it was.
NOT_SERIALIZABLE = 86

# Annotations stay text, so that a parameter may be annotated with a type the function
# imports inside itself (``df: pd.DataFrame``), as it must import all it uses.
_RUNNER = """from __future__ import annotations

import json
import sys

{source}

with open({arguments!r}) as _file:
    _arguments = json.load(_file)
_result = {name}(*_arguments["args"], **_arguments["kwargs"])
try:
    _text = json.dumps(_result)
except (TypeError, ValueError) as _error:
    sys.stderr.write(
        "The return value of {name}() cannot be serialized as JSON ("
        + str(_error)
        + "). Return JSON types only: dict, list, str, int, float, bool or None.\\n"
    )
    sys.exit({not_serializable})
with open({result!r}, "w") as _file:
    _file.write(_text)
"""

# The interpreter is found before anything runs, or a message says why there is none.
_COMMAND = 'python=$({lookup}) || {{ echo {missing} >&2; exit 127; }}; "$python" {script}'


def _command(image: str, python_command: str | None) -> str:
    """The command that runs the script with the image's Python, or ``python_command``."""
    if python_command is None:
        lookup = "command -v python3 || command -v python"
        missing = (
            f"@task.opensandbox needs python3 or python on the PATH of the image {image}, and "
            "it has neither. Use an image with Python, such as python:3.12-slim, or give "
            "python_command."
        )
    else:
        lookup = f"command -v {shlex.quote(python_command)}"
        missing = (
            f"@task.opensandbox was given python_command={python_command!r}, and the sandbox "
            f"of image {image} has no such command. Give the path of a Python interpreter in "
            "the image or the snapshot, such as /opt/venv/bin/python."
        )
    return _COMMAND.format(lookup=lookup, missing=shlex.quote(missing), script=SCRIPT)


class _OpenSandboxDecoratedOperator(DecoratedOperator, OpenSandboxOperator):
    """The decorated function, run as an :class:`OpenSandboxOperator`'s command."""

    custom_operator_name = "@task.opensandbox"
    template_fields = (*DecoratedOperator.template_fields, *OpenSandboxOperator.template_fields)
    template_fields_renderers = {
        **DecoratedOperator.template_fields_renderers,
        **OpenSandboxOperator.template_fields_renderers,
    }

    # The command is this operator's own, so no argument is ever read as a script file's name.
    template_ext = ()

    def __init__(
        self,
        *,
        python_callable: Callable,
        python_command: str | None = None,
        requirements: Sequence[str] | None = None,
        pip_args: Sequence[str] | None = None,
        setup_spec: SandboxSpec | None = None,
        snapshot_max_age: timedelta | float | None = None,
        **kwargs: Any,
    ) -> None:
        self.requirements, self.pip_args = checked_requirements(
            requirements, pip_args, setup_spec, snapshot_max_age
        )
        self.snapshot_max_age = _arguments.age(
            snapshot_max_age,
            "snapshot_max_age",
            none_means="keeps the requirements' snapshot for as long as it is used",
        )
        if self.requirements and isinstance(kwargs.get("warm_pool"), ServerPool):
            # Refused when the Dag is parsed, not after the requirements' snapshot is made.
            raise ValueError(
                f"Server pool {kwargs['warm_pool'].name!r} hands out pods started from its "
                "template, so the function cannot run in the snapshot holding its requirements. "
                "Install them in the Pool's image and drop requirements, or drop warm_pool."
            )
        self.setup_spec = setup_spec
        if self.requirements and python_command is None:
            python_command = VENV_PYTHON
        kwargs.setdefault("skip_on_exit_code", None)
        super().__init__(
            python_callable=python_callable,
            command=_command(kwargs.get("image", "python:3.12-slim"), python_command),
            xcom_path=RESULT,
            **kwargs,
        )

    def execute(self, context: Context) -> Any:
        try:
            arguments = json.dumps({"args": list(self.op_args), "kwargs": dict(self.op_kwargs)})
        except (TypeError, ValueError) as e:
            raise AirflowException(
                f"The arguments of {self.python_callable.__name__}() cannot be sent to the "
                f"sandbox as JSON ({e}). Pass JSON types only, or files through `files`."
            ) from e
        runner = _RUNNER.format(
            source=self.get_python_source(),
            name=self.python_callable.__name__,
            arguments=ARGUMENTS,
            result=RESULT,
            not_serializable=NOT_SERIALIZABLE,
        )
        # Added after templating, so the function's own text is never rendered as a template.
        self.files = {**self.files, SCRIPT: runner, ARGUMENTS: arguments}
        if self.requirements:
            # Masked before anything runs: pip, the backend's log of the command and a failed
            # set-up's message may each quote an index URL with its credentials.
            for argument in (*self.pip_args, *self.requirements):
                for secret in url_secrets(argument):
                    mask_secret(secret)
            # The set-up sandbox comes before the function's own, which the operator checks
            # the files before: a file that cannot go in costs neither.
            check_files(self.files, max_bytes=self.max_file_bytes)
            self.snapshot = self._prepared_environment()
        return super().execute(context)

    def _prepared_environment(self) -> str:
        """The snapshot holding ``requirements``, made now unless a run of the same inputs
        made it before; the function's own sandbox starts from it with its own ``spec``."""
        # Never from a warm pool: the set-up's sandbox is of the image, not of the snapshot.
        snapshot = prepare_snapshot(
            self.new_backend(warm_pool=None),
            set_up_commands(self.requirements, self.pip_args),
            spec=self.setup_spec,
            max_age=self.snapshot_max_age,
            command_timeout=self.command_timeout,
        )
        self.log.info(
            "The function runs in snapshot %s, which holds its requirements: %s.",
            snapshot,
            without_url_secrets(" ".join(self.requirements)),
        )
        return snapshot

    @staticmethod
    def xcom_push(context: Context, key: str, value: Any) -> None:
        """What Airflow 3.0's ``DecoratedOperator.execute`` reads off the operator after the
        command ran: Airflow's core ``BaseOperator`` has it, the task SDK's this operator is
        built on does not, and without it 3.0 fails the task once its command succeeded."""
        context["ti"].xcom_push(key=key, value=value)


def opensandbox_task(
    python_callable: Callable | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """
    Run the decorated function in a sandbox on an OpenSandbox server.

    Takes :class:`~opensandbox_provider.operators.opensandbox.OpenSandboxOperator`'s arguments
    but ``command`` and ``xcom_path``. The function must be self-contained: its source is
    what is sent, so it imports what it uses inside itself, and its arguments and return
    value are JSON types. The sandbox denies all egress unless ``spec`` opens it.

    :param python_callable: The function to run.
    :param python_command: The Python interpreter that runs the function, such as a virtual
        environment's ``/opt/venv/bin/python`` in a prepared snapshot. By default, the first
        of ``python3`` and ``python`` on the sandbox's ``PATH``, or the environment of
        ``requirements`` when there are any.
    :param requirements: Packages the function imports, as pip takes them
        (``["pandas==2.2.3"]``): installed once into a virtual environment of a prepared
        snapshot that every later run with the same inputs reuses, on any worker (see
        :doc:`/decorator`).
    :param pip_args: Arguments of the ``pip install`` before the requirements, such as
        ``["--index-url", "https://pypi.internal/simple"]``.
    :param setup_spec: The spec of the sandbox the requirements are installed in, which needs
        the network the function's own run may not have: by default open
        (``SandboxSpec(block_network=False)``); ``SandboxSpec(allow_egress_to=[...])`` names
        the package index alone. Its ``env`` becomes part of the snapshot: no secrets.
    :param snapshot_max_age: How old the requirements' snapshot may be, as a ``timedelta`` or
        seconds, before a run installs them again into a new one: for requirements that are
        not pinned, or an image tag that moves. ``None``, the default, keeps it.
    :param multiple_outputs: Push each key of a returned dict as an XCom of its own.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_OpenSandboxDecoratedOperator,
        **kwargs,
    )
