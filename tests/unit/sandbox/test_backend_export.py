"""The backend's export of a file out of a sandbox, against an execd that sends it too slowly."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.execd._deadline import Deadline
from opensandbox_provider.execd._execd import FileInfo
from opensandbox_provider.sandbox import OpenSandboxBackend, _limits

# Every chunk in time but the overall pace too slow: the first chunk at once, the next one
# only once the whole export's allowance has passed.
FIRST, LATE = b"a" * 100, b"b" * 100
MAX_BYTES = 1000
# The allowance of an export of up to MAX_BYTES, shortened from common-ai's 120 s so that the
# test does not wait it out.
ALLOWANCE = 0.05


class SlowExecd:
    """A sandbox's execd whose download sends its second chunk after the call's deadline."""

    def __init__(self) -> None:
        self.deadlines: list[Deadline] = []
        self.closed_early = False

    def file_info(self, path: str, *, purpose: str, deadline: Deadline) -> FileInfo:
        self.deadlines.append(deadline)
        return FileInfo(kind="file", size=len(FIRST + LATE), path=path)

    def download(self, path: str, *, max_bytes: int, deadline: Deadline) -> Iterator[bytes]:
        self.deadlines.append(deadline)
        sent_all = False
        try:
            yield FIRST
            # The deadline is the sandbox's to miss: it sends nothing until it has passed.
            time.sleep(max(0.0, deadline.at - time.monotonic()) + 0.01)
            yield LATE
            sent_all = True
        finally:
            self.closed_early = not sent_all


@pytest.fixture
def execd(monkeypatch: pytest.MonkeyPatch) -> SlowExecd:
    monkeypatch.setattr(_limits, "MIN_EXPORT_ALLOWANCE", ALLOWANCE)
    return SlowExecd()


def test_an_export_slower_than_its_allowance_is_ended_with_common_ais_message(execd) -> None:
    backend = OpenSandboxBackend()
    record = SimpleNamespace(sdk=SimpleNamespace(id="sbx"), execd=execd, resolve=lambda p: p)
    backend._sandbox = lambda sandbox: record  # type: ignore[method-assign]
    dest = io.BytesIO()

    with pytest.raises(SandboxError) as raised:
        backend.export_file("sbx", "/srv/out.bin", dest, max_bytes=MAX_BYTES)

    assert str(raised.value) == (
        "Exporting '/srv/out.bin' took longer than the 0.05s allowed for a file of up to 1000 "
        "bytes; the sandbox is sending it too slowly."
    )
    # The late chunk never reached the destination, and the download was let go of.
    assert dest.getvalue() == FIRST
    assert execd.closed_early
    # One allowance for the whole call: the file's description and its bytes alike.
    [described, downloaded] = execd.deadlines
    assert described is downloaded and described.seconds == ALLOWANCE
