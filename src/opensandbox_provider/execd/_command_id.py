"""
The id execd gives a command, checked before it goes into a URL or a log line.

execd names every command it starts with a random UUID written as 32 lowercase hexadecimal
digits (docs/execd-wire.rst, wire-command-id). The id arrives in the command's first event,
from whatever answers on execd's port, and goes into the paths of later requests and into log
lines; httpx collapses ``..`` in a path, so an id left unchecked could point a request at a
route of the guest's choosing.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider._errors import quoted

_COMMAND_ID = re.compile(r"[0-9a-f]{32}")


def checked(command_id: str, sandbox: str) -> str:
    """``command_id`` when it has execd's form; otherwise a ``SandboxError`` saying so."""
    if _COMMAND_ID.fullmatch(command_id):
        return command_id
    raise SandboxError(
        f"Sandbox {sandbox} named the command it started '{quoted(command_id, 80)}', which is "
        "not an id execd gives (32 lowercase hexadecimal digits), so what answers on its execd "
        "port is not execd. The command may still run until its deadline; the sandbox is not "
        "to be trusted with another."
    )


def in_path(command_id: str) -> str:
    """``command_id`` as one segment of a URL's path, whatever it holds."""
    return quote(command_id, safe="")
