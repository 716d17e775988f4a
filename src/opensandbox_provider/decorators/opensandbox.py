"""
``@task.opensandbox``: a Python function run in a sandbox of its own, with the image's Python.

As ``@task.docker`` does, the function's source is written into the sandbox with its
arguments, run there, and its return value read back. Arguments and the return value travel
as JSON rather than pickles, so the image's Python need not match the worker's, and nothing
the sandbox sends back is ever unpickled on the worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import (
    AirflowException,
    DecoratedOperator,
    task_decorator_factory,
)

from opensandbox_provider.operators.opensandbox import CommandEnd, OpenSandboxOperator

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context, TaskDecorator

    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

# Where the function, its arguments and its result live in the sandbox.
TASK_DIRECTORY = "/srv/airflow-opensandbox-task"
SCRIPT = f"{TASK_DIRECTORY}/script.py"
ARGUMENTS = f"{TASK_DIRECTORY}/arguments.json"
RESULT = f"{TASK_DIRECTORY}/result.json"
# The exit code the script ends with when the return value is not JSON: a code no Python
# exception gives, so the failure's message can say which it was.
NOT_SERIALIZABLE = 86
# A return value travels on as an XCom, in the metadata database; a larger result belongs
# in a file copied out through ``outputs``.
MAX_RESULT_BYTES = 8 * 1024 * 1024

_RUNNER = """
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

# The image's Python, found before anything runs, or a message saying there is none.
_COMMAND = (
    'python=$(command -v python3 || command -v python) || {{ echo "@task.opensandbox needs '
    "python3 or python on the PATH of the image {image}, and it has neither. Use an image "
    'with Python, such as python:3.12-slim." >&2; exit 127; }}; '
    '"$python" {script}'
)


class _OpenSandboxDecoratedOperator(DecoratedOperator, OpenSandboxOperator):
    """The decorated function, run as an :class:`OpenSandboxOperator`'s command."""

    custom_operator_name = "@task.opensandbox"
    template_fields = (*DecoratedOperator.template_fields, *OpenSandboxOperator.template_fields)
    template_fields_renderers = {
        **DecoratedOperator.template_fields_renderers,
        **OpenSandboxOperator.template_fields_renderers,
    }

    def __init__(self, *, python_callable: Callable, **kwargs: Any) -> None:
        kwargs.setdefault("skip_on_exit_code", None)
        super().__init__(
            python_callable=python_callable,
            command=_COMMAND.format(image=kwargs.get("image", "python:3.12-slim"), script=SCRIPT),
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
        return super().execute(context)

    def result(self, backend: OpenSandboxBackend, sandbox: str, end: CommandEnd) -> Any:
        return json.loads(backend.read_file(sandbox, RESULT, max_bytes=MAX_RESULT_BYTES))

    @staticmethod
    def xcom_push(context: Context, key: str, value: Any) -> None:
        """What Airflow 3.0's ``DecoratedOperator.execute`` reads off the operator after the
        command ran: Airflow's core ``BaseOperator`` has it, the task SDK's this operator is
        built on does not, and without it 3.0 fails the task once its command succeeded."""
        context["ti"].xcom_push(key=key, value=value)


def opensandbox_task(
    python_callable: Callable | None = None,
    multiple_outputs: bool | None = None,
    **kwargs: Any,
) -> TaskDecorator:
    """
    Run the decorated function in a sandbox on an OpenSandbox server.

    Takes :class:`~opensandbox_provider.operators.opensandbox.OpenSandboxOperator`'s arguments
    but ``command``. The function must be self-contained: its source is what is sent, so it
    imports what it uses inside itself, and its arguments and return value are JSON types.
    The sandbox denies all egress unless ``spec`` opens it.

    :param python_callable: The function to run.
    :param multiple_outputs: Push each key of a returned dict as an XCom of its own.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_OpenSandboxDecoratedOperator,
        **kwargs,
    )
