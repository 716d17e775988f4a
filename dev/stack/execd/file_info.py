"""The FileInfo JSON every file and directory endpoint answers with
(docs/execd-wire.rst, wire-fileinfo)."""

import grp
import os
import pwd
import stat

from go_encoding import go_time


def file_type(mode: int) -> str:
    """Symlinks are reported as such, never followed (docs/execd-wire.rst, wire-fileinfo)."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else "other"


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def file_info(path: str, status: os.stat_result) -> dict:
    """FileInfo. Directories report their inode size, created_at is the ctime, and mode is
    the permission bits written as octal digits in a decimal number (0o644 -> 644)
    (docs/execd-wire.rst, wire-fileinfo)."""
    return {
        "path": path,
        "type": file_type(status.st_mode),
        "size": status.st_size,
        "modified_at": go_time(status.st_mtime_ns),
        "created_at": go_time(status.st_ctime_ns),
        "owner": owner_name(status.st_uid),
        "group": group_name(status.st_gid),
        "mode": int(oct(stat.S_IMODE(status.st_mode) & 0o777)[2:]),
    }
