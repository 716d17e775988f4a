"""
The id execd gives a command, checked before it goes into a URL or a log line.

execd's ids are 32 lowercase hexadecimal digits (docs/execd-wire.rst, wire-command-id), but the
id comes from whatever answers on execd's port, and httpx collapses ``..`` in a path: unchecked,
it could point a later request at a route of the guest's choosing.
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
