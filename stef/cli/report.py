"""``stef report``: one self-contained HTML file of a results JSONL (:mod:`stef.report`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stef.calibration import Calibration, calibration_for
from stef.cli import integer
from stef.errors import FileError, StefError
from stef.exits import Exit
from stef.models import JudgeInfo
from stef.report.html import render
from stef.results_file import Record, read_results
from stef.review.labels import truth
from stef.review.records import unicode_text
from stef.settings import load_settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="one self-contained HTML report of a results file",
        description="Write one HTML file (inline CSS and SVG, nothing loaded from the network): "
        "per-app table (records, tiers, P10/P50, estimated accuracy, unsafe, judge errors with "
        "their reasons, needs review, cost, tokens), the score distribution, a reliability "
        "diagram when labels are given, and the lowest-scored records with their issues.",
    )
    p.add_argument("results", type=Path, help="results JSONL")
    p.add_argument(
        "-o", "--output", type=Path, required=True, help="HTML file to write (- for stdout)"
    )
    p.add_argument("--labels", type=Path, help="labels JSONL (stef review's)")
    p.add_argument("--input", type=Path, help="the agent log, to show question and SQL by id")
    p.add_argument("--worst", type=integer(0), default=20, help="lowest-scored records listed (20)")
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="the calibration the results were judged with, for the estimated accuracy "
        "(env STEF_CALIBRATION; default: the backend's own; none: no estimate)",
    )
    p.set_defaults(func=run)


def results_calibration(records: list[Record], setting: str | None) -> Calibration | None:
    """The calibration the results were judged with (as ``stef summary`` loads it): None when
    no evaluated result carries a calibrated confidence.

    Raises:
        StefError: the file is bad or was fitted for another judge.
    """
    for rec in records:
        components, judge = rec.get("components"), rec.get("judge")
        if not isinstance(components, dict) or not isinstance(judge, dict):
            continue
        if components.get("confidence_source") == "calibrated":
            try:
                info = JudgeInfo.model_validate(judge)
            except ValueError:
                continue
            return calibration_for(load_settings(None, {"calibration": setting}).calibration, info)
    return None


def run(args: argparse.Namespace) -> int:
    if args.labels is not None and not args.labels.exists():
        print(f"stef report: {args.labels}: no such file", file=sys.stderr)
        return Exit.FAILURE
    try:
        records = read_results(args.results, args.input)
        labels = truth(args.labels) if args.labels else {}
        sample = truth(args.labels, random_only=True) if args.labels else {}
    except FileError as exc:
        print(f"stef report: {exc}", file=sys.stderr)
        return Exit.FAILURE
    try:
        calibration = results_calibration(records, args.calibration)
    except StefError as exc:
        print(f"stef report: {exc}", file=sys.stderr)
        return Exit.USAGE
    page = render(
        records,
        source=args.results.name,
        labels=labels,
        sample=sample,
        worst_n=args.worst,
        calibration=calibration,
    )
    if str(args.output) == "-":  # stdout, as every command reads "-" (it wrote a file "-")
        sys.stdout.buffer.write(unicode_text(page).encode("utf-8"))
        sys.stdout.flush()
        print(f"stef report: {len(records)} results -> stdout", file=sys.stderr)
        return Exit.OK
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        # A lone surrogate (JSON allows "\ud800") cannot be UTF-8: written as U+FFFD.
        args.output.write_text(unicode_text(page), encoding="utf-8")
    except OSError as exc:
        print(f"stef report: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.FAILURE
    print(f"stef report: {len(records)} results -> {args.output}", file=sys.stderr)
    return Exit.OK
