"""
How a command's event stream ended: every way it can, one type for each, and what it said.

What the backend does next turns on the way (an abandoned stream's sandbox is destroyed, a
broken one's result says what the break cost), so it is a type, chosen where the stream is read
(:meth:`._execd.Execd.run`); its ``why`` is a clause for the sentences ``sandbox/_outcome.py``
and ``sandbox/backend.py`` log or put into the command's output.
"""

from __future__ import annotations

from dataclasses import dataclass

from opensandbox_provider.execd._events import Ending, EventParser


@dataclass(frozen=True)
class EndedByItself:
    """
    The stream ended on its own, with execd's terminal event, or without one where none is
    sent: a background command's stream ends once it has started, and a command that never
    said it started has no status to ask after.
    """


@dataclass(frozen=True)
class Abandoned:
    """
    The stream was given up on: execd never answered the command, the stream stalled or was
    open past its backstop, or it broke and execd could not then say how the command ended.
    The caller destroys the sandbox to end the command.
    """

    why: str


@dataclass(frozen=True)
class BrokeEndRecovered:
    """
    The stream broke before its terminal event, and the command's end was then read from
    execd's status (see :mod:`._recovery`); output written after the break may be missing.
    """

    why: str


@dataclass(frozen=True)
class BrokeEndUnknown:
    """
    The stream broke before its terminal event, and the command's end stayed unknown: execd
    had no record of the command, or the stream ended by itself (no sign of a stuck guest,
    so the sandbox is kept) and execd could then not say.
    """

    why: str


StreamEnd = EndedByItself | Abandoned | BrokeEndRecovered | BrokeEndUnknown


@dataclass(frozen=True)
class StreamedCommand:
    """
    What the event stream of one command said: the output and terminal event ``parser`` read,
    and how the stream ended. ``ending`` is how the command ended, from the terminal event or
    from execd's status read after a break, when either said.
    """

    parser: EventParser
    stream_end: StreamEnd

    @property
    def ending(self) -> Ending | None:
        return self.parser.ending
