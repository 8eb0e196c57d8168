"""Logging: structlog JSON lines on stderr, configured once per process.

Every line, structlog's and the standard library's (httpx, httpcore, kafka-python), passes
through :func:`redact_secrets` last: a value registered with :func:`register_secret` (the LLM
API key, the Kafka passwords) is replaced wherever it appears, also as a ``repr`` or JSON
escape, at any level.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import Any

import structlog

LEVELS = ("debug", "info", "warning", "error", "critical")

REDACTED = "[REDACTED]"
# Parts of a secret this short are too common to replace on their own.
_MIN_PART = 8
_secrets_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def register_secret(value: str | None) -> None:
    """Redact ``value`` from every log line from now on: as is, as Python's ``repr`` and JSON
    escape it (a key with a newline shows as ``\\n`` in an exception's repr), and each of its
    lines when it has several."""
    global _secrets
    if not value or len(value.strip()) < _MIN_PART:
        return
    forms = {value, value.encode("unicode_escape").decode("ascii"), json.dumps(value)[1:-1]}
    forms |= {part for part in value.split() if len(part) >= _MIN_PART}
    with _secrets_lock:
        # Longest first: a whole secret goes before one of its parts.
        _secrets = tuple(sorted(set(_secrets) | forms, key=len, reverse=True))


def redact_secrets(text: str) -> str:
    """``text`` with every registered secret replaced by ``[REDACTED]``."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


class _SecretFilter(logging.Filter):
    """Redacts the standard library's records (their message, arguments and traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = redact_secrets(message), None
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        record.exc_info = None
        return True


def _render(logger: Any, name: str, event: Any) -> str:
    """structlog's JSON line, redacted as a whole (whatever field a secret got into)."""
    out = _JSON(logger, name, event)
    return redact_secrets(out if isinstance(out, str) else out.decode("utf-8", "replace"))


_JSON = structlog.processors.JSONRenderer()


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
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _SecretFilter) for f in handler.filters):
            handler.addFilter(_SecretFilter())
    # sqlglot logs a warning for every statement it falls back to parsing as a Command.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _render,
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
