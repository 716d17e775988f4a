"""How one command's shell is started: environment, shell, user, output files
(docs/execd-wire.rst, wire-launch)."""

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from command_request import CommandRequest
from go_encoding import go_errno_text
from path_expansion import PathError, expand_path, go_expand


def env_file_entries() -> dict:
    """KEY=VALUE lines of $EXECD_ENVS, re-read for every command. Blank and # lines are
    skipped; values are expanded with execd's environment; quotes are NOT stripped
    (docs/execd-wire.rst, wire-launch)."""
    path = os.environ.get("EXECD_ENVS", "")
    if not path:
        return {}
    try:
        with open(expand_path(path), "rb") as env_file:
            text = env_file.read().decode("utf-8", "surrogateescape")
    except (OSError, PathError):
        return {}
    entries = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, separator, value = line.partition("=")
        if separator:
            entries[key] = go_expand(value, lambda name: os.environ.get(name, ""))
    return entries


@dataclass
class Launch:
    """Everything needed to start one command's shell."""

    argv: list
    executable: str
    env: dict
    cwd: str | None
    user: int | None
    group: int | None
    extra_groups: list | None


def shell() -> tuple[str, str]:
    """bash -c if bash is on execd's PATH, else sh -c (docs/execd-wire.rst, wire-launch)."""
    bash = shutil.which("bash")
    return ("bash", bash) if bash else ("sh", shutil.which("sh") or "/bin/sh")


def credentials(uid: int | None, gid: int | None) -> tuple[int | None, int | None, list | None]:
    """uid's primary group unless gid is given, and uid's supplementary groups
    (docs/execd-wire.rst, wire-launch)."""
    if uid is None:
        return None, None, None
    primary, groups = 0, []
    try:
        account = pwd.getpwuid(uid)
    except KeyError:
        pass
    else:
        primary = account.pw_gid
        groups = os.getgrouplist(account.pw_name, account.pw_gid)
    return uid, primary if gid is None else gid, groups


def prepare_launch(request: CommandRequest) -> Launch:
    """execd's environment, overlaid by $EXECD_ENVS, overlaid by the request's envs; cwd
    expanded with those. A cwd that cannot be expanded is a PathError
    (docs/execd-wire.rst, wire-launch)."""
    extra = {**env_file_entries(), **request.envs}
    name, executable = shell()
    user, group, extra_groups = credentials(request.uid, request.gid)
    return Launch(
        argv=[name, "-c", request.command],
        executable=executable,
        env={**os.environ, **extra},
        cwd=expand_path(request.cwd, extra) or None,
        user=user,
        group=group,
        extra_groups=extra_groups,
    )


def start_process(launch: Launch, stdout, stderr) -> subprocess.Popen:
    """Stdin is /dev/null and the shell leads a new process group (pgid = pid)
    (docs/execd-wire.rst, wire-launch)."""
    return subprocess.Popen(
        launch.argv,
        executable=launch.executable,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=launch.cwd,
        env=launch.env,
        process_group=0,
        user=launch.user,
        group=launch.group,
        extra_groups=launch.extra_groups,
    )


def start_failure_text(launch: Launch, error: OSError) -> str:
    """Go's text for a failed start ("fork/exec /usr/bin/bash: operation not permitted")
    (docs/execd-wire.rst, wire-sequences)."""
    if launch.cwd and isinstance(error, FileNotFoundError) and error.filename == launch.cwd:
        return f"chdir {launch.cwd}: {go_errno_text(error)}"
    return f"fork/exec {launch.executable}: {go_errno_text(error)}"


def output_path(command_id: str, kind: str) -> str:
    """Output goes to files in $TMPDIR, not pipes ("<id>.stdout", "<id>.output")
    (docs/execd-wire.rst, wire-launch)."""
    return os.path.join(tempfile.gettempdir(), f"{command_id}.{kind}")


def open_output_file(path: str):
    """An output file is created afresh and never deleted (docs/execd-wire.rst, wire-launch)."""
    os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
    return open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o777), "wb", buffering=0)
