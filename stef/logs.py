"""Logging: structlog JSON lines on stderr, configured once per process."""

from __future__ import annotations

import logging
import os
import sys

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
    return structlog.WriteLogger(sys.stderr)
