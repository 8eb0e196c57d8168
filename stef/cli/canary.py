"""``stef canary add``: grow the canary file from labelled results (:mod:`stef.review.canary`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stef.errors import FileError
from stef.exits import Exit
from stef.labels_file import read_labels
from stef.results_file import read_results
from stef.review.canary import canary_lines
from stef.review.labels import append_label, latest_labels


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("canary", help="grow the canary file from labelled results")
    actions = p.add_subparsers(dest="action", required=True)
    add = actions.add_parser(
        "add",
        help="append labelled results to the canary file",
        description="Append every result labelled correct or incorrect (stef review's labels) "
        "that is not in the canary file yet, as a canary line (the stef calibrate format): the "
        "canary then measures the judge on the app's own traffic.",
    )
    add.add_argument("--results", type=Path, required=True, help="results JSONL")
    add.add_argument("--labels", type=Path, required=True, help="labels JSONL (stef review's)")
    add.add_argument("--canary", type=Path, required=True, help="canary JSONL (appended)")
    add.add_argument("--input", type=Path, help="the agent log, for question and SQL by id")
    add.add_argument("--app", help="only the results of this app")
    add.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        existing = (
            {str(x.payload.get("id")) for x in read_labels(args.canary)}
            if args.canary.exists()
            else set()
        )
        lines, no_text = canary_lines(
            read_results(args.results, args.input),
            latest_labels(args.labels),
            existing=existing,
            app=args.app,
        )
    except FileError as exc:
        print(f"stef canary: {exc}", file=sys.stderr)
        return Exit.FAILURE
    except OSError as exc:
        print(f"stef canary: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.FAILURE
    try:
        for line in lines:
            append_label(args.canary, line)  # the same locked, fsynced append as labels
    except OSError as exc:
        print(f"stef canary: {args.canary}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.FAILURE
    print(json.dumps({"added": len(lines), "without_question_or_sql": no_text}))
    if no_text:
        print(
            f"stef canary: {no_text} labelled results have no question or SQL "
            "(results_include_input was off: give the agent log with --input)",
            file=sys.stderr,
        )
    return Exit.OK
