"""Logging: one stream on stderr, configured once per process.

STEF's own structlog lines and the standard-library records of its dependencies (kafka-python,
openai, httpx, httpcore) go through the same processors (:func:`shared_processors`) and the same
renderer, so every line on stderr has the same keys (``timestamp``, ``level``, ``logger``,
``event``) and the same form:

- ``json``: one JSON object a line, for log pipelines;
- ``console``: aligned ``key=value`` text for people (colours only on a terminal);
- ``auto`` (the default): ``console`` when stderr is a terminal, ``json`` otherwise.

The HTTP and Kafka clients' own loggers stay at warning whatever ``level`` says (their debug
lines are connection internals, hundreds per record), unless ``deps_level`` asks for them.

Every rendered line passes through :func:`~stef.redact.redact_secrets` last: a value registered
with :func:`~stef.redact.register_secret` (the LLM API key, the Kafka passwords) is replaced
wherever it appears, also as a ``repr`` or JSON escape, at any level and in any format.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TextIO

import structlog
from structlog.typing import Processor

from stef.redact import redact_secrets

LEVELS = ("debug", "info", "warning", "error", "critical")


class _RedactingFormatter(structlog.stdlib.ProcessorFormatter):
    """The one formatter of every line on stderr (STEF's and the dependencies'): the rendered
    line is redacted as a whole, whatever field or traceback a secret got into."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_secrets(super().format(record))


FORMATS = ("auto", "json", "console")

# Loggers of the libraries STEF talks through; their debug and info lines are client internals.
DEPENDENCY_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "openai",
    "kafka",
    "urllib3",
)


def shared_processors() -> list[Processor]:
    """The processors every line goes through before it is rendered, STEF's own structlog lines
    and the dependencies' standard-library records alike: one list for both, so a processor
    added here (redaction, say) sees every line that reaches stderr."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure_logging(
    level: str | None = None, fmt: str | None = None, deps_level: str | None = None
) -> None:
    """Log lines on stderr at ``level``, rendered as ``fmt``.

    Args:
        level: the lowest level written (default ``$STEF_LOG_LEVEL``, else warning).
        fmt: ``auto``, ``json`` or ``console`` (default ``$STEF_LOG_FORMAT``, else auto).
        deps_level: the lowest level written by the HTTP and Kafka clients' loggers
            (default ``$STEF_LOG_DEPS_LEVEL``, else warning or ``level`` if that is higher).

    Raises:
        ValueError: a level is not one of :data:`LEVELS`, or ``fmt`` not one of :data:`FORMATS`.
    """
    name = _choice(level or os.environ.get("STEF_LOG_LEVEL") or "warning", LEVELS, "log level")
    form = _choice(fmt or os.environ.get("STEF_LOG_FORMAT") or "auto", FORMATS, "log format")
    deps = deps_level or os.environ.get("STEF_LOG_DEPS_LEVEL") or None
    numeric = getattr(logging, name.upper())
    if deps is None:
        deps_numeric = max(numeric, logging.WARNING)
    else:
        deps_numeric = getattr(logging, _choice(deps, LEVELS, "log level").upper())
    tty = _stderr_is_tty()
    console = form == "console" or (form == "auto" and tty)

    shared = shared_processors()
    formatter = _RedactingFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *_renderer(console=console, colors=console and tty),
        ],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)  # configured again (a command re-reads its level from settings)
    root.addHandler(handler)
    root.setLevel(numeric)
    for dependency in DEPENDENCY_LOGGERS:
        logging.getLogger(dependency).setLevel(deps_numeric)
    # sqlglot logs a warning for every statement it falls back to parsing as a Command.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    name = value.lower()
    if name not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, not {name!r}")
    return name


def _renderer(*, console: bool, colors: bool) -> list[Processor]:
    if console:
        # The console renderer lays out exceptions itself (format_exc_info would flatten them).
        return [structlog.dev.ConsoleRenderer(colors=colors)]
    return [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


_dropped = 0
_dropped_lock = threading.Lock()


def dropped_lines() -> int:
    """Log lines lost since the process started because stderr refused them (closed or full)."""
    return _dropped


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to ``sys.stderr`` as it is when a line is written, not when configured: tests and
    tools (the replay's progress bar) swap it after configuration.

    A line never raises into the code that logs it: a stderr that is closed or full (a replay
    run with ``2>/dev/full``) drops the line and counts it (:func:`dropped_lines`). A worker that
    logs must not die of it, or leak its record."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        # Handler.handle holds this handler's lock around emit: no other thread swaps it between.
        self.stream = sys.stderr
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        # logging's default prints a traceback to the very stderr that just failed.
        global _dropped
        with _dropped_lock:
            _dropped += 1
