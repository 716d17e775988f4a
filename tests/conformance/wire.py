"""A raw HTTP view of a sandbox's execd, for the wire details the SDK hides.

The base URL and headers are the ones the SDK itself resolves (`get_endpoint(44772)`), so these
requests take the same path through the stack as the SDK's own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from opensandbox import SandboxSync
from opensandbox.constants import DEFAULT_EXECD_PORT

# A bound on any one exchange with execd, so a broken stack fails a test instead of hanging it.
READ_BOUND_S = 60
TERMINAL_TYPES = {"execution_complete", "error"}


@dataclass(frozen=True)
class Frame:
    """One event frame as it arrived: its bytes (without the separator) and when."""

    raw: bytes
    arrived_at: float

    @property
    def event(self) -> dict:
        return json.loads(self.raw)

    @property
    def type(self) -> str:
        return self.event["type"]


@dataclass
class CommandStream:
    """A whole /command response, read to its end."""

    response: httpx.Response
    frames: list[Frame]
    ended_at: float
    trailing: bytes  # bytes after the last separator (execd appends a late error there raw)

    @property
    def types(self) -> list[str]:
        return [frame.type for frame in self.frames]

    def of_type(self, *types: str) -> list[dict]:
        return [frame.event for frame in self.frames if frame.type in types]

    @property
    def terminal_frames(self) -> list[Frame]:
        return [frame for frame in self.frames if frame.type in TERMINAL_TYPES]


class ExecdWire:
    def __init__(self, client: httpx.Client):
        self.client = client

    @classmethod
    def of(cls, sandbox: SandboxSync) -> ExecdWire:
        endpoint = sandbox.get_endpoint(DEFAULT_EXECD_PORT)
        client = httpx.Client(
            base_url=f"http://{endpoint.endpoint}",
            headers=endpoint.headers,
            timeout=httpx.Timeout(READ_BOUND_S),
        )
        return cls(client)

    def __enter__(self) -> ExecdWire:
        return self

    def __exit__(self, *exc_info) -> None:
        self.client.close()

    @property
    def base_url(self) -> httpx.URL:
        return self.client.base_url

    def get(self, path: str, **options) -> httpx.Response:
        return self.client.get(path, **options)

    def run(self, body: dict) -> CommandStream:
        """POST /command and read the response to its end, frame by frame."""
        with self.open_command(body) as (response, frames):
            collected = list(frames)
            ended_at = time.monotonic()
        return CommandStream(response, collected, ended_at, frames.trailing)

    @contextmanager
    def open_command(self, body: dict, read_timeout: float = READ_BOUND_S):
        """POST /command; yields the response and a live iterator of its frames."""
        timeout = httpx.Timeout(READ_BOUND_S, read=read_timeout)
        with self.client.stream("POST", "/command", json=body, timeout=timeout) as response:
            yield response, FrameReader(response)


class FrameReader:
    """Splits an event stream on execd's separator ("\\n\\n") as the bytes arrive."""

    def __init__(self, response: httpx.Response):
        self._chunks = response.iter_raw()
        self._buffer = b""
        self.trailing = b""

    def __iter__(self) -> Iterator[Frame]:
        for chunk in self._chunks:
            self._buffer += chunk
            while b"\n\n" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\n\n", 1)
                yield Frame(raw, time.monotonic())
        self.trailing = self._buffer
