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
import sys

from stef import __version__
from stef.cli import (
    backfill,
    calibrate,
    canary,
    check,
    estimate,
    judge,
    replay,
    report,
    review,
    rules,
    run,
    summary,
)
from stef.exits import Exit
from stef.logs import FORMATS, LEVELS, configure_logging


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stef", description="Production judge for Text-to-SQL agents")
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
    for command in (
        judge,
        replay,
        summary,
        rules,
        run,
        calibrate,
        backfill,
        review,
        report,
        estimate,
        canary,
        check,
    ):
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        configure_logging(args.log_level, args.log_format, args.log_deps_level)
    except ValueError as exc:  # STEF_LOG_* holds a level or format that does not exist
        print(f"stef: STEF_LOG_*: {exc}", file=sys.stderr)
        return Exit.USAGE
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
