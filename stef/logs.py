"""Logging: structlog JSON lines on stderr, configured once per process."""

from __future__ import annotations

import logging
import os
import sys
import threading

import structlog

LEVELS = ("debug", "info", "warning", "error", "critical")


def configure_logging(level: str | None = None) -> None:
    """JSON lines on stderr at ``level`` (default ``$STEF_LOG_LEVEL``, else warning).

    Raises:
        ValueError: ``level`` is not one of :data:`LEVELS`.
    """
    name = (level or os.environ.get("STEF_LOG_LEVEL") or "warning").lower()
    if name not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {name!r}")
    numeric = getattr(logging, name.upper())
    logging.basicConfig(level=numeric, stream=sys.stderr, format="%(message)s")
    # sqlglot logs a warning for every statement it falls back to parsing as a Command.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # sys.stderr as it is when a line is written (tests and tools swap it), not at configure.
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def _stderr_logger(*args: object) -> structlog.WriteLogger:
    return _SafeWriteLogger(sys.stderr)


_dropped = 0
_dropped_lock = threading.Lock()


def dropped_lines() -> int:
    """Log lines lost since the process started because stderr refused them (closed or full)."""
    return _dropped


class _SafeWriteLogger(structlog.WriteLogger):
    """A log line never raises into the code that logs it: a stderr that is closed or full (a
    replay run with ``2>/dev/full``) drops the line and counts it, as :mod:`logging` handlers do
    (``Handler.handleError``). A worker that logs must not die of it, or leak its record."""

    def msg(self, message: str) -> None:
        global _dropped
        try:
            super().msg(message)
        except (OSError, ValueError):  # ValueError: the stream was closed
            with _dropped_lock:
                _dropped += 1

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg
