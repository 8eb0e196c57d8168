"""The lifecycle of one replica: a stop requested (the first SIGTERM/SIGINT, or a failure), a
quick stop (SIGQUIT), a second signal that exits at once, the failure that makes the run exit 1,
the closing phase in which a late failure of abandoned work is expected, and a rules check asked
for by SIGHUP."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

import structlog

from stef import signals
from stef.service.health import HealthState

log = structlog.get_logger(__name__)


class Lifecycle:
    """Whether the replica runs, drains, failed or closes.

    Args:
        health: the probes' state (a failure fails ``/healthz`` and ``/readyz`` for good).
        inflight: how many records are in flight (logged with a stop request).

    Attributes:
        stopped: set once a stop is requested; the loop stops fetching and drains.
        stop_at: when it was requested (the drain deadline counts from it); None before.
        signals: the stop signals received, in order (the handler only records them).
        quick: whether the first was SIGQUIT: the stop waits for no record in flight.
        check_rules: set by SIGHUP: the loop checks the rules now, contents included.
        reopen_outputs: set by SIGUSR1: the loop reopens the results and dead-letter files.
        ignored: the signals received that mean nothing to STEF (SIGUSR2), for the loop to log.
        fatal: the error that failed the run (exit 1), or None.
        closing: True once the service shuts down.
    """

    def __init__(self, health: HealthState, inflight: Callable[[], int]) -> None:
        self.health = health
        self._inflight = inflight
        self.stopped = threading.Event()
        self.stop_at: float | None = None
        self.signals: list[int] = []
        self.check_rules = threading.Event()
        self.reopen_outputs = threading.Event()
        self.ignored: list[int] = []
        self.fatal: BaseException | None = None
        self.closing = False

    @property
    def quick(self) -> bool:
        """Whether the stop was asked for by SIGQUIT: it abandons the records in flight."""
        return bool(self.signals) and self.signals[0] == getattr(signal, "SIGQUIT", None)

    def request_stop(self) -> None:
        """Stop fetching and drain (the first SIGTERM/SIGINT)."""
        if not self.stopped.is_set():
            self.stop_at = time.monotonic()
            self.stopped.set()
            log.info("shutdown_requested", inflight=self._inflight())

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: the first drains, a second exits at once with 128 + the signal
        (uncommitted work is redelivered). SIGQUIT, "quit now": the same stop without waiting
        for the records in flight (they are redelivered); what is written is still committed,
        where its default action (a core) committed nothing and logged nothing. SIGHUP asks for
        a rules check, as a config reload does in other daemons; SIGUSR1 for the output files
        to be opened again, as logrotate's ``postrotate`` asks of other daemons; SIGUSR2 means
        nothing to STEF and is logged, not obeyed (each of the three used to end the process
        undrained: the default action). The handlers only record the signal."""

        on_signal = signals.recorder(self.signals)

        def on_hangup(signum: int, frame: FrameType | None) -> None:
            self.check_rules.set()

        def on_user1(signum: int, frame: FrameType | None) -> None:
            self.reopen_outputs.set()

        def on_user2(signum: int, frame: FrameType | None) -> None:
            self.ignored.append(signum)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        for name, handler in (("SIGQUIT", on_signal), ("SIGUSR2", on_user2)):
            number = getattr(signal, name, None)  # none on Windows
            if number is not None:
                signal.signal(number, handler)
        hangup = getattr(signal, "SIGHUP", None)  # none on Windows
        if hangup is not None:
            signal.signal(hangup, on_hangup)
        user1 = getattr(signal, "SIGUSR1", None)
        if user1 is not None:
            signal.signal(user1, on_user1)
        # The signals of start-up, taken over once no more can reach the start-up handler.
        self.signals[:0] = signals.early
        signals.early.clear()

    def fail(self, error: BaseException) -> None:
        """A record cannot be settled: stop with nothing committed past it (exit 1)."""
        if self.fatal is None:
            self.fatal = error
            self.health.failed = str(error)
        self.request_stop()
