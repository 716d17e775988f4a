"""
One sandbox's files through execd: what a path names, its bytes, and whose fault a failure is.

execd's file API answers 404 for a missing path and, reached through the server, for a
missing sandbox alike, and a sandbox that ends cuts a download short as a file that shrinks
does. Each failure here is told apart by asking again (the server whether the sandbox is
gone, execd whether the file is still what it was), so the model hears which it was.
"""

from __future__ import annotations

from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import (
    SandboxError,
    SandboxFileTooLargeError,
    SandboxTerminalError,
)

from opensandbox_provider._errors import to_sandbox_error
from opensandbox_provider.execd._deadline import Deadline
from opensandbox_provider.execd._execd import CutShort, Entry, FileInfo, NoSuchPath
from opensandbox_provider.sandbox import _lifecycle
from opensandbox_provider.sandbox._limits import (
    MIN_EXPORT_ALLOWANCE,
    check_export_deadline,
    export_allowance,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import BinaryIO

    from opensandbox_provider.sandbox._record import SandboxRecord


@dataclass(frozen=True)
class Transfer:
    """A download under way: the path as resolved, what execd says it is, and its bytes."""

    path: str
    entry: FileInfo
    chunks: Iterator[bytes]
    # The whole call's, description and transfer alike.
    deadline: Deadline

    def read(self, max_bytes: int) -> bytes:
        """The file's bytes, stopping at the first one past ``max_bytes``."""
        data = bytearray()
        for chunk in self.chunks:
            data += chunk
            if len(data) > max_bytes:
                break
        return bytes(data)

    def copy_to(self, dest: BinaryIO, max_bytes: int) -> int:
        """Write the file's bytes to ``dest`` as they arrive, refusing any past ``max_bytes``."""
        written = 0
        for chunk in self.chunks:
            check_export_deadline(self.path, self.deadline.at, max_bytes)
            if written + len(chunk) > max_bytes:
                raise SandboxFileTooLargeError(self.path, written + len(chunk), max_bytes)
            dest.write(chunk)
            written += len(chunk)
        return written


@dataclass(frozen=True)
class SandboxFiles:
    """The files of the sandbox ``record`` describes."""

    record: SandboxRecord

    def write(self, path: str, content: bytes) -> None:
        path = self.record.resolve(path)
        deadline = Deadline.after(export_allowance(len(content)))
        with self._unless_gone():
            self.record.execd.upload(path, content, deadline=deadline)

    def list_directory(self, path: str, *, limit: int) -> list[Entry]:
        """The entries at ``path``; a directory of more than ``limit`` is refused, not listed."""
        path = self.record.resolve(path)
        deadline = Deadline.after(MIN_EXPORT_ALLOWANCE)
        with self._unless_gone():
            entries = self.record.execd.list_directory(path, limit=limit, deadline=deadline)
        if entries is None:
            raise SandboxError(
                f"{path!r} holds more than {limit} entries, too many to list. List a "
                "subdirectory, or use a shell command that narrows it, such as `ls | head -100` or "
                "`find <path> -maxdepth 1 -name '*.csv'`."
            )
        return entries

    @contextmanager
    def download(self, path: str, *, max_bytes: int, purpose: str) -> Iterator[Transfer]:
        """
        The path as resolved, the regular file it names, and that file's first
        ``max_bytes + 1`` bytes as they arrive; a file that says it is larger is refused
        before any of it is transferred.

        The description and every byte of the transfer count against one deadline, the one
        common-ai gives its own export, for a read as for an export.
        """
        record = self.record
        deadline = Deadline.after(export_allowance(max_bytes))
        path = record.resolve(path)
        entry = self._regular_file(path, purpose=purpose, deadline=deadline)
        if entry.size > max_bytes:
            raise SandboxFileTooLargeError(path, entry.size, max_bytes)
        try:
            # The file itself, not the path asked for: a link retargeted from here on
            # changes nothing about what is read.
            with (
                self._unless_gone(),
                closing(
                    record.execd.download(entry.path, max_bytes=max_bytes, deadline=deadline)
                ) as chunks,
            ):
                yield Transfer(path, entry, chunks, deadline)
        except CutShort as e:
            if self._unchanged(entry, purpose=purpose, deadline=deadline):
                # Neither the sandbox nor the file changed: the transfer itself failed.
                cause = e.__cause__ or e
                translated = to_sandbox_error(cause, f"{purpose} {path!r}")
                if translated is None or translated is cause:
                    raise cause from None
                raise translated from cause
            done = "exported" if purpose == "export" else "read"
            raise SandboxError(
                f"{path!r} changed while it was {done}: it was {entry.size} bytes when the "
                f"{purpose} began, and the sandbox sent less. A process in the sandbox may "
                "still be writing it."
            ) from None

    def _unchanged(self, entry: FileInfo, *, purpose: str, deadline: Deadline) -> bool:
        """Whether the file ``entry`` describes is still that file, of that size."""
        # Within what is left of the call's deadline: a transfer cut short by the deadline
        # itself never gets here, execd's client reports it as the deadline's.
        try:
            now = self.record.execd.file_info(entry.path, purpose=purpose, deadline=deadline)
        except NoSuchPath:
            return False
        return now.kind == "file" and now.size == entry.size

    def _regular_file(self, path: str, *, purpose: str, deadline: Deadline) -> FileInfo:
        """
        The regular file at ``path``, following a symbolic link to what it points to, which
        is judged as the path itself would be.
        """
        execd = self.record.execd
        with self._unless_gone():
            info = execd.file_info(path, purpose=purpose, deadline=deadline)
            if info.kind == "symlink":
                target = execd.link_target(info.path)
                if target is None:
                    raise SandboxError(
                        f"{path!r} is a symbolic link, and the sandbox could not resolve what it "
                        "points to. Give the path of the file itself."
                    )
                info = execd.file_info(target, purpose=purpose, deadline=deadline)
        if info.kind == "directory":
            raise SandboxError(f"{path!r} is a directory. Use list_directory to see what is in it.")
        if info.kind != "file":
            raise SandboxError(
                f"{path!r} is not a regular file (it is a device, a pipe or a socket)."
            )
        return info

    @contextmanager
    def _unless_gone(self) -> Iterator[None]:
        """A missing path, or a download cut short, as such unless the sandbox itself is gone."""
        try:
            yield
        except (NoSuchPath, CutShort) as e:
            if _lifecycle.gone(self.record.sdk):
                raise SandboxTerminalError(
                    f"Sandbox {self.record.sdk.id} no longer exists: it was destroyed or reached "
                    "the end of its lifetime on the server."
                ) from e
            if isinstance(e, CutShort):
                raise
            # The contract's own class, not our marker subclass: callers and the toolset
            # compare it exactly, as they do common-ai's.
            raise SandboxError(str(e)) from None
