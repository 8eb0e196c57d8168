"""``stef calibrate LABELS``: agreement of the judge with human labels (:mod:`stef.calibrate`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

from stef.calibrate.agreement import DEFAULT_THRESHOLD, MIN_RESAMPLES, Item, best_threshold
from stef.calibrate.labels import judge_all, read_labels, without_sampling
from stef.calibrate.plot import write_histogram
from stef.calibrate.report import header, render, report
from stef.cli.common import add_common, preflight, report_error, settings_of
from stef.errors import StefError
from stef.exits import Exit
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="agreement with human labels",
        description="Agreement of the judge with human labels: Cohen's kappa with a bootstrap CI, "
        "balanced accuracy, sensitivity and specificity (positive class: correct), per source, "
        "app, complexity tier, error type and verdict.",
    )
    p.add_argument("file", type=Path, help="JSONL of input records with a boolean 'label'")
    p.add_argument(
        "--pass-threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="predict correct when score >= this (default 75)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", type=Path, help="write a PNG of score histograms here")
    p.add_argument("--concurrency", type=int, default=8, help="records in flight (default 8)")
    p.add_argument("--limit", type=int, help="judge only the first N records")
    p.add_argument("--reformat", action="store_true", help="re-format every SQL with sqlglot first")
    p.add_argument("--resamples", type=int, default=MIN_RESAMPLES, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_common(p, rules_help="rules file or directory (default: built-in defaults)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``stef calibrate ...``; returns the exit status."""
    if args.concurrency < 1 or (args.limit is not None and args.limit < 1):
        print("stef calibrate: --concurrency and --limit must be at least 1", file=sys.stderr)
        return Exit.USAGE
    if args.resamples < MIN_RESAMPLES:
        print(f"stef calibrate: --resamples must be at least {MIN_RESAMPLES}", file=sys.stderr)
        return Exit.USAGE
    try:
        # The labels file uses STEF's own field names: no field mapping applies to it.
        settings = settings_of(args, {"field_mapping": {}})
        records = read_labels(args.file, args.limit)
        rules = without_sampling(load_rules(settings.rules))
    except ValueError as exc:
        print(f"stef calibrate: {exc}", file=sys.stderr)
        return Exit.FAILURE
    except (StefError, OSError) as exc:
        return report_error("stef calibrate", exc)
    if not records:
        print(f"stef calibrate: {args.file} has no labelled records", file=sys.stderr)
        return Exit.FAILURE
    unusable = preflight("stef calibrate", settings)
    if unusable is not None:
        return unusable
    progress = _progress(len(records), sys.stderr.isatty() and not args.no_progress)
    with contextlib.ExitStack() as stack:
        try:
            backend = build_backend(settings)
        except StefError as exc:
            return report_error("stef calibrate", exc)
        stack.callback(backend.close)
        items = judge_all(
            build_pipeline(settings, rules, backend),
            records,
            concurrency=args.concurrency,
            reformat=args.reformat,
            on_progress=progress,
        )
    _print_report(args, items, backend.info.backend)
    return Exit.OK


def _print_report(args: argparse.Namespace, items: list[Item], backend: str) -> None:
    rep = report(items, args.pass_threshold, resamples=args.resamples, seed=args.seed)
    best = best_threshold(items, args.pass_threshold)
    if args.plot:
        write_histogram(args.plot, items, args.pass_threshold, best.value if best else None)
    if args.json:
        context = header(
            threshold=args.pass_threshold,
            best=best,
            backend=backend,
            resamples=args.resamples,
            seed=args.seed,
            reformatted=args.reformat,
        )
        plot = {"plot": str(args.plot) if args.plot else None}
        print(json.dumps({**context, **plot, **rep}, ensure_ascii=False))
        return
    print(
        render(
            rep,
            threshold=args.pass_threshold,
            best=best,
            backend=backend,
            resamples=args.resamples,
            reformatted=args.reformat,
        )
    )
    if args.plot:
        print(f"\nplot: {args.plot}")


def _progress(total: int, show: bool) -> Callable[[int], None]:
    def progress(done: int) -> None:
        if show and (done == total or done % 25 == 0):
            print(f"\rjudged {done}/{total}", end="\n" if done == total else "", file=sys.stderr)

    return progress
