"""``stef review``: the labelling page (:mod:`stef.review.server`)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from stef.cli import integer
from stef.errors import FileError
from stef.exits import Exit
from stef.results_file import read_results
from stef.review.labels import read_label_lines
from stef.review.records import ORDERS
from stef.review.server import Review, ReviewServer


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "review",
        help="a page to label results as correct or incorrect",
        description="Serve a page where the app's owners label results one at a time (keys: c "
        "correct, i incorrect, s skip, n note, arrows move). Each label is appended to the "
        "labels file at once; the page resumes at the first record nobody labelled.",
    )
    p.add_argument("--results", type=Path, required=True, help="results JSONL")
    p.add_argument("--labels", type=Path, required=True, help="labels JSONL (appended)")
    p.add_argument("--input", type=Path, help="the agent log, to show question and SQL by id")
    p.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    p.add_argument(
        "--port", type=integer(0, 65535), default=8765, help="port (default 8765; 0: any free)"
    )
    p.add_argument(
        "--reviewer",
        help="name kept with a label posted without one (default: the login name); the page "
        "asks each reviewer's name and keeps it per browser",
    )
    p.add_argument(
        "--order",
        choices=ORDERS,
        default="teaching",
        help="teaching (default): the records a label teaches most first; random: a fixed "
        "random sample, the labels stef estimate uses",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        records = read_results(args.results, args.input)
        read_label_lines(args.labels)  # a broken labels file is said now, not on the page
    except FileError as exc:
        print(f"stef review: {exc}", file=sys.stderr)
        return Exit.FAILURE
    reviewer = args.reviewer or _login()
    review = Review(records, args.labels, reviewer=reviewer, order=args.order)
    try:
        server = ReviewServer(review, args.host, args.port)
    except OSError as exc:
        print(f"stef review: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return Exit.FAILURE
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"stef review: {len(review.queue)} records; open http://{host}:{server.port}/ "
        "(Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return Exit.OK


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "reviewer"
