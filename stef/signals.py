"""Stop signals that come while a service command is still starting (imports, settings,
preflight: seconds), before a replica's own handlers: recorded here, by a handler that needs
nothing imported, and taken over by the replica (:mod:`stef.service.lifecycle`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType

# The signals received so far, in order; the replica takes them over.
early: list[int] = []


def catch_early() -> None:
    """SIGTERM/SIGINT/SIGQUIT are recorded, not fatal (they ended start-up with status 143, or
    130 and a traceback from whatever import was running, or 131 and a core); a second one
    exits at once with 128 + it."""
    # What a replica does on SIGHUP (check the rules) and SIGUSR1 (reopen its outputs) is
    # already done at start, and SIGUSR2 means nothing to it: none ends the process meanwhile
    # (their default action). Set first: once SIGTERM is caught every one of them is (a
    # supervisor, or a test, that sees SIGTERM caught may send any; SIGUSR1 sent between the
    # two ended the process, -10).
    for name in ("SIGHUP", "SIGUSR1", "SIGUSR2"):
        number = getattr(signal, name, None)  # none on Windows
        if number is not None:
            signal.signal(number, _nothing)
    on_signal = recorder(early)
    quit_ = getattr(signal, "SIGQUIT", None)  # none on Windows
    if quit_ is not None:
        signal.signal(quit_, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def recorder(into: list[int]) -> Callable[[int, FrameType | None], None]:
    """A stop signal's handler that only records it in ``into``; a second one exits at once with
    128 + it (the start-up's and the replica's alike)."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        into.append(signum)
        if len(into) > 1:
            os._exit(128 + signum)

    return on_signal


def _nothing(signum: int, frame: FrameType | None) -> None:
    """A signal with nothing to do yet."""
