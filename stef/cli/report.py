"""``stef report``: one self-contained HTML file of a results JSONL (:mod:`stef.report`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stef.exits import Exit
from stef.report.html import render
from stef.review.labels import truth
from stef.review.records import RecordsError, read_results


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
    p.add_argument("-o", "--output", type=Path, required=True, help="HTML file to write")
    p.add_argument("--labels", type=Path, help="labels JSONL (stef review's)")
    p.add_argument("--input", type=Path, help="the agent log, to show question and SQL by id")
    p.add_argument("--worst", type=int, default=20, help="lowest-scored records listed (20)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.worst < 0:
        print("stef report: --worst must be at least 0", file=sys.stderr)
        return Exit.USAGE
    try:
        records = read_results(args.results, args.input)
        labels = truth(args.labels) if args.labels else {}
        sample = truth(args.labels, random_only=True) if args.labels else {}
    except RecordsError as exc:
        print(f"stef report: {exc}", file=sys.stderr)
        return Exit.FAILURE
    page = render(
        records, source=args.results.name, labels=labels, sample=sample, worst_n=args.worst
    )
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"stef report: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.FAILURE
    print(f"stef report: {len(records)} results -> {args.output}", file=sys.stderr)
    return Exit.OK
