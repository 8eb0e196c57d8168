"""``stef summary``: the summary of a results JSONL file, as text, JSON, CSV or Markdown."""

from __future__ import annotations

import argparse
import sys

from stef.cli import integer
from stef.errors import FileError, StefError
from stef.exits import Exit
from stef.files import iter_lines
from stef.results_file import iter_results
from stef.settings import load_settings
from stef.summary import FORMATS, Summary


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("summary", help="summary table of a results JSONL file")
    s.add_argument("file")
    s.add_argument("--dead-letters", help="dead-letter JSONL, to count invalid input")
    s.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: one screen (120 columns); json, csv, markdown: every figure, full names",
    )
    s.add_argument(
        "--calibration",
        metavar="FILE",
        help="the calibration the results were judged with, for the estimated accuracy "
        "(env STEF_CALIBRATION; default: the backend's own; none: no estimate)",
    )
    s.add_argument(
        "--worst",
        type=integer(0),
        default=0,
        metavar="N",
        help="also list the N lowest-scored evaluated records (id, app, score, issues, question)",
    )
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    summary = Summary(worst_n=args.worst)
    try:
        for _, result in iter_results(args.file):
            summary.add(result)
        summary.invalid_known = bool(args.dead_letters)
        if args.dead_letters:
            # Counted, not read: a byte that is not UTF-8 still makes a line (lenient), and a
            # file without line ends stops at the bound (open() read /dev/zero until memory ran
            # out, and a bad byte was reported against the results file).
            summary.invalid = sum(1 for _ in iter_lines(args.dead_letters, lenient=True))
    except FileError as exc:
        print(f"stef summary: {exc}", file=sys.stderr)
        return Exit.FAILURE
    try:
        summary.load_calibration(load_settings(None, {"calibration": args.calibration}).calibration)
    except StefError as exc:
        print(f"stef summary: {exc}", file=sys.stderr)
        return Exit.USAGE
    print(summary.render(args.format))
    return Exit.OK
