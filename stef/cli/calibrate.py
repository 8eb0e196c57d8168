"""``stef calibrate LABELS``: agreement of the judge with human labels (:mod:`stef.calibrate`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from stef.calibrate.agreement import DEFAULT_THRESHOLD, MIN_RESAMPLES, Item, best_threshold
from stef.calibrate.joined import disagreements, join, render_disagreements
from stef.calibrate.labels import judge_all, read_labels, without_sampling
from stef.calibrate.plot import write_histogram
from stef.calibrate.report import header, render, report
from stef.cli.common import add_common, preflight, report_error, settings_of
from stef.cli.progress import Progress
from stef.errors import StefError
from stef.exits import Exit
from stef.review.records import RecordsError
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
    p.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="JSONL of input records with a boolean 'label' (judged now); or give --results "
        "and --labels",
    )
    p.add_argument(
        "--pass-threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="predict correct when score >= this (default 75)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", type=Path, help="write an SVG of score histograms here")
    p.add_argument("--concurrency", type=int, default=8, help="records in flight (default 8)")
    p.add_argument("--limit", type=int, help="judge only the first N records")
    p.add_argument("--reformat", action="store_true", help="re-format every SQL with sqlglot first")
    p.add_argument("--resamples", type=int, default=MIN_RESAMPLES, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.add_argument(
        "--results", type=Path, help="results already judged (JSONL), joined to --labels by id"
    )
    p.add_argument("--labels", type=Path, help="labels JSONL (stef review's), with --results")
    p.add_argument("--input", type=Path, help="the agent log, to show questions by id")
    p.add_argument(
        "--disagreements",
        type=int,
        default=10,
        help="with --results: list this many records judge and label disagree on (default 10)",
    )
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
    if args.results is not None or args.labels is not None or args.file is None:
        return _run_joined(args)
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
    progress = Progress(len(records), sys.stderr.isatty() and not args.no_progress)
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
            on_progress=progress.update_to,
        )
    progress.close()
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


def _run_joined(args: argparse.Namespace) -> int:
    """``stef calibrate --results R --labels L``: labels joined to judged results by id."""
    if args.file is not None or args.results is None or args.labels is None:
        print(
            "stef calibrate: give a labelled input file, or --results and --labels (not both)",
            file=sys.stderr,
        )
        return Exit.USAGE
    if args.disagreements < 0:
        print("stef calibrate: --disagreements must be at least 0", file=sys.stderr)
        return Exit.USAGE
    try:
        joined = join(args.results, args.labels, args.input)
    except RecordsError as exc:
        print(f"stef calibrate: {exc}", file=sys.stderr)
        return Exit.FAILURE
    if not joined.items:
        print(
            f"stef calibrate: no label in {args.labels} names a judged result of {args.results}",
            file=sys.stderr,
        )
        return Exit.FAILURE
    backends = sorted({_backend(rec) for rec, _ in joined.pairs})
    rows = disagreements(joined, args.pass_threshold, args.disagreements)
    extra = {"labels_unmatched": joined.unmatched, "disagreements": rows}
    tail = render_disagreements(rows, args.pass_threshold)
    if joined.unmatched:
        tail = f"{tail}\n\n{joined.unmatched} labels name no judged result (left out)"
    _print_joined(args, joined.items, "+".join(backends), extra, tail)
    return Exit.OK


def _backend(rec: dict[str, Any]) -> str:
    judge = rec.get("judge")
    return str(judge.get("backend")) if isinstance(judge, dict) else "unknown"


def _print_joined(
    args: argparse.Namespace,
    items: list[Item],
    backend: str,
    extra: dict[str, object],
    tail: str,
) -> None:
    """The agreement report of joined labels, then the disagreements (in JSON: two more keys)."""
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
            reformatted=False,
        )
        plot = {"plot": str(args.plot) if args.plot else None}
        print(json.dumps({**context, **plot, **rep, **extra}, ensure_ascii=False))
        return
    print(
        render(
            rep,
            threshold=args.pass_threshold,
            best=best,
            backend=backend,
            resamples=args.resamples,
            reformatted=False,
        )
    )
    if args.plot:
        print(f"\nplot: {args.plot}")
    print(f"\n{tail}")
