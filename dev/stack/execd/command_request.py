"""The body of POST /command, decoded and validated as execd does
(docs/execd-wire.rst, wire-command-request)."""

import json
import os
import stat
from dataclasses import dataclass

from exchange import bad_request
from go_decode import GO_BOOL, GO_STRING, GO_STRING_MAP, GoStruct, decode_request_body, go_integer
from go_encoding import go_path_error
from path_expansion import PathError, expand_path


@dataclass
class CommandRequest:
    command: str
    cwd: str
    background: bool
    timeout_ms: int
    uid: int | None
    gid: int | None
    envs: dict


RUN_COMMAND_REQUEST = GoStruct(
    "RunCommandRequest",
    {
        "command": GO_STRING,
        "cwd": GO_STRING,
        "background": GO_BOOL,
        "timeout": go_integer("int64", -(2**63), 2**63),
        "uid": go_integer("uint32", 0, 2**32),
        "gid": go_integer("uint32", 0, 2**32),
        "envs": GO_STRING_MAP,
    },
)


def parse_command_request(body: bytes) -> CommandRequest:
    """A body execd cannot decode is a 400 INVALID_REQUEST_BODY
    (docs/execd-wire.rst, wire-command-request)."""
    fields = decode_request_body(body, RUN_COMMAND_REQUEST.decode)
    return CommandRequest(
        command=fields["command"] or "",
        cwd=fields["cwd"] or "",
        background=bool(fields["background"]),
        timeout_ms=fields["timeout"] or 0,
        uid=fields["uid"],
        gid=fields["gid"],
        envs=fields["envs"] or {},
    )


def validate_command_request(request: CommandRequest) -> None:
    """The validator's messages, then the uid/gid rule, then the working directory
    (docs/execd-wire.rst, wire-command-request)."""
    problems = []
    if not request.command:
        problems.append(
            "Key: 'RunCommandRequest.Command' "
            "Error:Field validation for 'Command' failed on the 'required' tag"
        )
    if request.timeout_ms < 0:
        problems.append(
            "Key: 'RunCommandRequest.TimeoutMs' "
            "Error:Field validation for 'TimeoutMs' failed on the 'gte' tag"
        )
    if not problems and request.gid is not None and request.uid is None:
        problems.append("uid is required when gid is provided")
    if not problems:
        problem = working_directory_problem(request.cwd)
        if problem:
            problems.append(problem)
    if problems:
        raise bad_request("invalid request, validation error " + "\n".join(problems))


def working_directory_problem(cwd: str) -> str:
    """cwd is expanded with execd's own environment only, then must be a directory
    (docs/execd-wire.rst, wire-command-request)."""
    if not cwd:
        return ""
    try:
        resolved = expand_path(cwd)
    except PathError as error:
        return f"cannot resolve working directory {json.dumps(cwd)}: {error}"
    try:
        is_directory = stat.S_ISDIR(os.stat(resolved).st_mode)
    except FileNotFoundError as error:
        return f"working directory does not exist: {cwd}: {go_path_error('stat', resolved, error)}"
    except OSError as error:
        cause = go_path_error("stat", resolved, error)
        return f"cannot access working directory {json.dumps(cwd)}: {cause}"
    return "" if is_directory else f"working directory path is not a directory: {cwd}"
