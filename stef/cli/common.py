"""What every subcommand shares: the common flags and the one way to read settings."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from stef.errors import ConfigError, EndpointError, RulesError, StefError
from stef.exits import Exit
from stef.judges.llm import check_local
from stef.judges.llm.preflight import check_endpoint
from stef.logs import FORMATS, LEVELS
from stef.settings import Settings, load_settings


def add_common(p: argparse.ArgumentParser, *, rules_help: str = "rules file or directory") -> None:
    """``--config``, ``--rules`` and ``--log-level``: the same on every command."""
    p.add_argument("--config", help="YAML settings file (env STEF_CONFIG)")
    p.add_argument("--rules", help=f"{rules_help} (env STEF_RULES)")
    p.add_argument(
        "--log-level",
        choices=LEVELS,
        default=argparse.SUPPRESS,  # keeps a `stef --log-level X` given before the command
        help="log level on stderr (env STEF_LOG_LEVEL)",
    )
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        default=argparse.SUPPRESS,
        help="auto: console text on a terminal, JSON lines otherwise (env STEF_LOG_FORMAT)",
    )
    p.add_argument(
        "--log-deps-level",
        choices=LEVELS,
        default=argparse.SUPPRESS,
        help="level of the HTTP and Kafka clients' own loggers (warning; env STEF_LOG_DEPS_LEVEL)",
    )


def settings_of(
    args: argparse.Namespace,
    overrides: Mapping[str, Any] | None = None,
    *,
    cache: str | None = None,
) -> Settings:
    """The settings: defaults < ``--config`` file < ``STEF_*`` env < the command's flags.

    Raises:
        ConfigError: any setting is invalid.
    """
    flags = {"rules": args.rules, **(overrides or {})}
    for key in ("log_level", "log_format", "log_deps_level"):
        value = getattr(args, key, None)
        if value is not None:
            flags[key] = value
    settings = load_settings(args.config, {k: v for k, v in flags.items() if v is not None})
    if cache is not None:
        llm = settings.llm.model_copy(update={"cache_path": Path(cache)})
        settings = settings.model_copy(update={"llm": llm})
    return settings


def preflight(command: str, settings: Settings) -> int | None:
    """Check the LLM endpoint once before any record is read (``llm.preflight``); print why it
    is unusable and give the exit status, or None to go on (no LLM configured, or it answers).
    """
    if not settings.llm.configured:
        return None
    try:
        check_local(settings.llm)  # a settings error is exit 2, whether the endpoint answers
    except ConfigError as exc:
        return report_error(command, exc)
    if not settings.llm.preflight:
        return None
    try:
        checked = check_endpoint(settings.llm)
    except EndpointError as exc:
        print(
            f"{command}: {exc} (model {settings.llm.model}; check STEF_LLM_BASE_URL and "
            "STEF_LLM_API_KEY, or run stef check)",
            file=sys.stderr,
        )
        return Exit.JUDGE_ERROR
    log = structlog.get_logger(__name__)
    # A model the list does not name is said, not refused: Azure lists models, not deployments.
    (log.warning if checked.model_listed is False else log.info)(
        "llm_endpoint_checked", model=settings.llm.model, result=checked.describe()
    )
    return None


def tell(text: str) -> None:
    """One line on stderr. A stderr that fails (``2>/dev/full``, closed) loses the line, never
    the exit status the run earned: ``stef replay --fail-on``'s 4 came out as 1 there."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr)


def report_error(command: str, exc: BaseException) -> int:
    """Print a failure in one line (a line per rules problem) and give its exit status."""
    if isinstance(exc, RulesError):
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return Exit.USAGE
    if isinstance(exc, StefError):
        print(f"{command}: {exc}", file=sys.stderr)
        return Exit.USAGE
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{command}: {where}{exc.strerror or exc}", file=sys.stderr)
        return Exit.FAILURE
    raise exc


def every_record_invalid(
    command: str, count: int, reason: str | None, mapping: dict[str, str]
) -> str:
    """The line of a run whose every record was a dead letter, with the likely cause: most
    often the agent's log uses other field names than the ``field_mapping`` in force."""
    why = f" (most common reason: {reason})" if reason else ""
    if reason in (None, "missing_field"):
        why += (
            f"; is field_mapping {mapping} right for this log?"
            if mapping
            else "; does the log use other field names? set field_mapping (docs/input-record.md)"
        )
    return f"{command}: every one of the {count} records was invalid input{why}"
