"""Command line: one parser tree, a module per subcommand (SPEC §5). Argument parsing and wiring
only; every command that judges goes through the one record path (:mod:`stef.pipeline`).

stef judge      one record from flags or stdin; prints the result JSON
stef replay     a JSONL log through the service; results JSONL and a summary table
stef summary    the summary table of a results JSONL file
stef rules      check rules files (line-numbered errors) or print their JSON schema
stef run        the service
stef calibrate  agreement with human labels
stef review     a page to label results
stef report     one HTML file: per-app table, score distribution, worst records
stef estimate   the agent's accuracy with a confidence interval (judge + labels)
stef canary     grow the canary file from labelled results
stef check      the settings, the rules and the LLM endpoint, checked at once

Exit statuses are defined once, in :mod:`stef.exits`.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import io
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from stef import __version__
from stef.exits import Exit

# Each command, in the order `stef --help` lists them, with its one-line help. A command's
# module is imported only when that command runs (or the whole tree is asked for): `stef
# --version` and `stef --help` load no judge, no HTTP client, no logging library.
# tests/cli/test_startup.py checks these lines against the modules' own.
COMMANDS: dict[str, str] = {
    "judge": "judge one record (flags, or one JSON record on stdin)",
    "replay": "judge a JSONL agent log and print a summary",
    "summary": "summary table of a results JSONL file",
    "rules": "rules files",
    "run": "the service: judge every logged request of a source, at least once",
    "calibrate": "agreement with human labels",
    "backfill": "re-judge a time range of a Kafka topic, outside the live group",
    "review": "a page to label results as correct or incorrect",
    "report": "one self-contained HTML report of a results file",
    "estimate": "the agent's accuracy with a 95%% confidence interval (judge + labels)",
    "canary": "grow the canary file from labelled results",
    "check": "check the settings, the rules and the LLM endpoint",
}
# stef.logs's names, here so that building the parser does not import structlog
# (tests/cli/test_startup.py checks they are the same).
LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("auto", "json", "console")


class StefParser(argparse.ArgumentParser):
    """An argument parser whose errors suggest the flag or choice that was probably meant."""

    def error(self, message: str) -> NoReturn:
        hint = _did_you_mean(self, message)
        super().error(message + (f" (did you mean {hint}?)" if hint else ""))


def _did_you_mean(p: argparse.ArgumentParser, message: str) -> str | None:
    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if unknown:
        flags = sorted(_flags(p))
        for word in unknown.group(1).split():
            if word.startswith("-"):
                close = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1, cutoff=0.6)
                if close:
                    return str(close[0])
        return None
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        options = re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(choice.group(1), options, n=1, cutoff=0.6)
        return repr(close[0]) if close else None
    return None


def _flags(p: argparse.ArgumentParser) -> set[str]:
    """The option strings of ``p`` and of every subcommand parser built under it."""
    out = {s for s in p._option_string_actions if s.startswith("--")}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _flags(sub)
    return out


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` (to ``high``), else a usage error naming the
    flag and the range (exit 2, as every other usage error)."""

    def check(text: str) -> int:
        value = int(text)  # not an integer: argparse says "invalid int value", as type=int does
        if value < low or (high is not None and value > high):
            bounds = f"at least {low}" if high is None else f"{low}..{high}"
            raise argparse.ArgumentTypeError(f"must be {bounds}")
        return value

    check.__name__ = "int"
    return check


def number(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number from ``low`` to ``high``, else a usage error naming the flag
    and the range (exit 2)."""

    def check(text: str) -> float:
        value = float(text)  # not a number: argparse says "invalid float value"
        if not low <= value <= high:  # NaN included
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}")
        return value

    check.__name__ = "float"
    return check


def parser(command: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser tree: every command's module loaded (the default), only ``command``'s, or
    none (``lazy``: each command a line of help, enough for ``--help`` and ``--version``)."""
    p = StefParser(prog="stef", description="Production judge for Text-to-SQL agents")
    p.add_argument("--version", action="version", version=f"stef {__version__}")
    p.add_argument(
        "--log-level", choices=LEVELS, default=None, help="log level (env STEF_LOG_LEVEL)"
    )
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        default=None,
        help="auto: console text on a terminal, JSON lines otherwise (env STEF_LOG_FORMAT)",
    )
    p.add_argument(
        "--log-deps-level",
        choices=LEVELS,
        default=None,
        help="level of the HTTP and Kafka clients' own loggers (warning; env STEF_LOG_DEPS_LEVEL)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_line in COMMANDS.items():
        if (command is None and not lazy) or name == command:
            importlib.import_module(f"stef.cli.{name}").add_parser(sub)
        else:
            sub.add_parser(name, help=help_line)
    return p


def command_of(argv: list[str]) -> str | None:
    """The command ``argv`` runs: its first word that names one (flags and their values come
    before it; no value of a top-level flag is a command's name)."""
    for word in argv:
        if word == "--":
            return None
        if word in COMMANDS:
            return word
    return None


# The commands that run a replica: a stop signal during their start-up stops them cleanly.
_SERVICES = ("run", "replay", "backfill")


def _closed_streams_on_devnull() -> None:
    """A standard stream closed at start (``>&-``, ``2>&-``, ``<&-``) is None in ``sys``: its
    descriptor is given /dev/null before any file is opened (a file opened on descriptor 1
    would take what is printed). Standard input reads nothing; standard output is read-only,
    so what a command writes there (results with ``-o -``, a summary) fails as on a broken
    stream and is said, never lost in silence; standard error takes the lines and drops them."""
    for fd, name, mode, flags in (
        (0, "stdin", "r", os.O_RDONLY),
        (1, "stdout", "w", os.O_RDONLY),
        (2, "stderr", "w", os.O_WRONLY),
    ):
        if getattr(sys, name) is not None:
            continue
        null = os.open(os.devnull, flags)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        stream = open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115 (the process's stream)
        setattr(sys, name, stream)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process's own streams, not a test's
        _closed_streams_on_devnull()
        _own_stdout()
    words = sys.argv[1:] if argv is None else argv
    command = command_of(words)
    if command in _SERVICES and argv is None:  # the process's own command line, not a test's
        from stef import signals  # noqa: PLC0415 (the standard library's signal, os only)

        signals.catch_early()
    try:
        args = parser(command, lazy=command is None).parse_args(words)
    except SystemExit as exc:  # --help, --version, a usage error: said, then exit
        if argv is not None:
            raise
        return _flushed(exc.code if isinstance(exc.code, int) else Exit.USAGE)
    from stef.logs import configure_logging  # noqa: PLC0415 (structlog: only when a command runs)

    try:
        configure_logging(args.log_level, args.log_format, args.log_deps_level)
    except ValueError as exc:  # STEF_LOG_* holds a level or format that does not exist
        print(f"stef: STEF_LOG_*: {exc}", file=sys.stderr)
        return Exit.USAGE
    try:
        status = int(args.func(args))
    except BrokenPipeError:
        return Exit.OK
    except StdoutError as exc:  # a print of the command's output: stdout is closed or full
        return _unwritable(exc, Exit.FAILURE)
    return _flushed(status) if argv is None else status


class StdoutError(OSError):
    """Standard output refused what a command printed (closed, full); a reader that left is
    still a BrokenPipeError."""


class _Stdout(io.TextIOWrapper):
    """The process's standard output, whose write and flush failures say they are its own:
    an OSError of another file or of standard input is never taken for one."""

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from exc

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from exc


def _own_stdout() -> None:
    """``sys.stdout`` as a :class:`_Stdout` over the same buffer (results written to
    ``sys.stdout.buffer`` go on as before)."""
    out = sys.stdout
    if type(out) is not io.TextIOWrapper:  # already ours, or a test's capture
        return
    encoding, errors = out.encoding, out.errors
    line_buffering, write_through = out.line_buffering, out.write_through
    out.flush()
    sys.stdout = _Stdout(
        out.detach(),
        encoding=encoding,
        errors=errors,
        line_buffering=line_buffering,
        write_through=write_through,
    )


def _flushed(status: int) -> int:
    """``status`` once what the command printed is out; a standard output that cannot take it
    fails the command in one line (a reader that left, ``| head``, is no failure)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
    except OSError as exc:
        return _unwritable(exc, status or Exit.FAILURE)
    return status


def _unwritable(exc: OSError, status: int) -> int:
    """A standard output that cannot take what the command printed (closed, full): one line
    and a failed command, rather than a traceback or the interpreter's "Exception ignored"
    and exit 120 at its own last flush."""
    with contextlib.suppress(OSError, ValueError):
        print(f"stef: standard output: {exc.strerror or exc}", file=sys.stderr)
    silence_stdout()
    return status


def silence_stdout() -> None:
    """Standard output onto /dev/null: what is left in it, and the interpreter's own last
    flush, write nothing (a reader that left, a stdout closed or full)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


if __name__ == "__main__":
    sys.exit(main())
