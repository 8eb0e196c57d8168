"""Judge errors in the log: each record the judge could not decide says why, at warning, without
a line per record when an endpoint fails them all.

The first error of each reason is logged at once, with its detail; later ones of the same reason
at most once per ``interval_s``, with how many occurred since the last line (``count``) and in
all (``total``). At the end of a run the reasons with errors not yet logged get their line.
The reasons are the bounded labels of ``stef_judge_errors_total``, so the lines and the metric
agree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from stef.metrics import judge_error_reason
from stef.models import Result

log = structlog.get_logger(__name__)

# One line per reason per this many seconds, at most.
INTERVAL_S = 60.0


@dataclass
class _Reason:
    total: int = 0
    unlogged: int = 0
    last_logged: float = 0.0
    detail: str = ""
    app: str | None = None


class JudgeErrorLog:
    """The rate-limited warning lines of judge errors (thread-safe).

    Args:
        interval_s: the shortest time between two lines of one reason.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._reasons: dict[str, _Reason] = {}

    def observe(self, result: Result) -> None:
        """Log a result's judge error (``judge_error`` outcome, or an evaluated result whose
        judge failed: an unsafe statement scored by the safety override alone)."""
        if not result.error or result.outcome not in ("judge_error", "evaluated"):
            return
        reason = judge_error_reason(result.error)
        now = self._clock()
        with self._lock:
            state = self._reasons.setdefault(reason, _Reason())
            state.total += 1
            state.unlogged += 1
            state.detail, state.app = result.error, result.app
            if state.total > 1 and now - state.last_logged < self.interval_s:
                return
            count, total = state.unlogged, state.total
            state.unlogged, state.last_logged = 0, now
        self._line(reason, count, total, result.error, result.app)

    def flush(self) -> None:
        """Log every reason with errors not logged yet (the end of a run)."""
        with self._lock:
            pending = [(r, s) for r, s in self._reasons.items() if s.unlogged]
            lines = [(r, s.unlogged, s.total, s.detail, s.app) for r, s in pending]
            for _, state in pending:
                state.unlogged = 0
        for line in lines:
            self._line(*line)

    @property
    def totals(self) -> dict[str, tuple[int, str]]:
        """Per reason: the errors seen and the latest detail."""
        with self._lock:
            return {r: (s.total, s.detail) for r, s in self._reasons.items()}

    @staticmethod
    def _line(reason: str, count: int, total: int, detail: str, app: str | None) -> None:
        log.warning("judge_error", reason=reason, count=count, total=total, app=app, error=detail)
