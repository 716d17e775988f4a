"""execd's ChmodFile (a file's mode, owner and group) and POST /files/permissions
(docs/execd-wire.rst, wire-chmod, wire-permissions)."""

import grp
import os
import pwd
import re

from exchange import Exchange, runtime_error
from filesystem import FileError, absolute_path_or_file_error
from go_decode import GO_INT, GO_STRING, GoMapOf, GoStruct, decode_request_body
from go_encoding import go_path_error

PERMISSION = GoStruct("Permission", {"owner": GO_STRING, "group": GO_STRING, "mode": GO_INT})
PERMISSIONS_BY_PATH = GoMapOf(PERMISSION)


def set_ownership(path: str, owner: str, group: str) -> None:
    """Owner and group are looked up by name; an unknown name is skipped, and when neither
    resolves the file goes to execd's own uid and gid (docs/execd-wire.rst, wire-chmod)."""
    uid = gid = -1
    if owner:
        try:
            uid = pwd.getpwnam(owner).pw_uid
        except KeyError:
            pass
    if group:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            pass
    if uid == -1 and gid == -1:
        uid, gid = os.getuid(), os.getgid()
    try:
        os.chown(path, uid, gid)
    except OSError as error:
        raise FileError(
            f"failed to set owner/group for {path}: {go_path_error('chown', path, error)}",
            isinstance(error, FileNotFoundError),
        ) from None


def apply_permission(path: str, permission: dict) -> None:
    """Mode is decimal-coded octal (755 -> 0o755), 0 means no chmod, and only the
    permission bits are applied; ownership is always set (docs/execd-wire.rst, wire-chmod)."""
    absolute = absolute_path_or_file_error(path)
    mode = permission["mode"] or 0
    if mode:
        if not re.fullmatch(r"[0-7]+", str(mode)):
            raise FileError(f'strconv.ParseUint: parsing "{mode}": invalid syntax')
        try:
            os.chmod(absolute, int(str(mode), 8) & 0o777)
        except OSError as error:
            raise FileError.from_os_error("chmod", absolute, error) from None
    set_ownership(absolute, permission["owner"] or "", permission["group"] or "")


def set_permissions(exchange: Exchange) -> None:
    """ChmodFile for each entry (docs/execd-wire.rst, wire-permissions)."""
    for path, permission in decode_request_body(
        exchange.body(), PERMISSIONS_BY_PATH.decode
    ).items():
        try:
            apply_permission(path, permission)
        except FileError as error:
            raise runtime_error(f"error changing permissions for {path}. {error}") from None
    exchange.respond_empty()
