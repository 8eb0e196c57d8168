"""``stef calibrate LABELS``: agreement of the judge with human labels (:mod:`stef.calibrate`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from stef.calibrate.agreement import DEFAULT_THRESHOLD, MIN_RESAMPLES, Item, best_threshold
from stef.calibrate.fit import Point, fit
from stef.calibrate.labels import judge_all, read_labels, without_sampling
from stef.calibrate.plot import write_histogram
from stef.calibrate.report import header, render, render_fit, report
from stef.calibration import Calibration, judged_of
from stef.cli.common import add_common, report_error, settings_of
from stef.errors import StefError
from stef.exits import Exit
from stef.models import JudgeInfo
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
    p.add_argument(
        "--fit",
        type=Path,
        metavar="FILE",
        help="fit a calibration (raw signal -> P(correct)) on these labels and write it here",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="calibration file applied at judge time; none: off (env STEF_CALIBRATION; "
        "default: the backend's own, the heuristic ships one)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=1000,
        help="records per window for the smallest detectable accuracy drop (default 1000)",
    )
    add_common(p, rules_help="rules file or directory (default: built-in defaults)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``stef calibrate ...``; returns the exit status."""
    if args.concurrency < 1 or args.window < 1 or (args.limit is not None and args.limit < 1):
        print(
            "stef calibrate: --concurrency, --window and --limit must be at least 1",
            file=sys.stderr,
        )
        return Exit.USAGE
    if args.resamples < MIN_RESAMPLES:
        print(f"stef calibrate: --resamples must be at least {MIN_RESAMPLES}", file=sys.stderr)
        return Exit.USAGE
    try:
        # The labels file uses STEF's own field names: no field mapping applies to it.
        settings = settings_of(args, {"field_mapping": {}, "calibration": args.calibration})
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
    progress = _progress(len(records), sys.stderr.isatty() and not args.no_progress)
    with contextlib.ExitStack() as stack:
        try:
            backend = build_backend(settings)
        except StefError as exc:
            return report_error("stef calibrate", exc)
        stack.callback(backend.close)
        try:
            pipeline = build_pipeline(settings, rules, backend)
        except StefError as exc:
            return report_error("stef calibrate", exc)
        items = judge_all(
            pipeline,
            records,
            concurrency=args.concurrency,
            reformat=args.reformat,
            on_progress=progress,
        )
    if args.fit is not None:
        return _fit(args, items, backend.info)
    _print_report(args, items, backend.info.backend, pipeline.calibration)
    return Exit.OK


def _fit(args: argparse.Namespace, items: list[Item], info: JudgeInfo) -> int:
    """Fit a calibration on the raw signal (whatever calibration is loaded), write it, say what
    it does across sources."""
    points = [
        Point(
            raw=i.raw,
            label=i.label,
            source=i.source or i.app or "unknown",
            # The uncalibrated decision, whatever calibration is loaded: the raw signal at
            # --pass-threshold / 100 (for the heuristic: its raw score >= the threshold).
            raw_pass=i.raw >= args.pass_threshold / 100,
        )
        for i in items
        if i.raw is not None
    ]
    try:
        cal = fit(points, judged_of(info), labels_file=args.file.name)
    except ValueError as exc:
        print(f"stef calibrate: {exc}", file=sys.stderr)
        return Exit.FAILURE
    try:
        args.fit.parent.mkdir(parents=True, exist_ok=True)
        args.fit.write_text(cal.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        return report_error("stef calibrate", exc)
    if args.json:
        print(json.dumps({"fit": str(args.fit), **cal.model_dump(mode="json")}))
    else:
        print(render_fit(cal, str(args.fit), judge_errors=len(items) - len(points)))
    return Exit.OK


def _print_report(
    args: argparse.Namespace, items: list[Item], backend: str, cal: Calibration | None
) -> None:
    threshold = args.pass_threshold
    pass_rule = f"score >= {threshold:g}"
    if cal is not None:
        # With a calibration, pass/fail is p_correct >= the threshold fitted with it; the
        # agreement tables read p_correct x 100 where they read the score.
        items = [
            replace(i, score=None if i.p_correct is None else i.p_correct * 100) for i in items
        ]
        threshold = cal.threshold * 100
        pass_rule = f"p_correct >= {cal.threshold:g}"
    rep = report(items, threshold, resamples=args.resamples, seed=args.seed, window=args.window)
    probability = (
        f"p_correct (calibration: {cal.describe()})"
        if cal is not None
        else "the raw signal (no calibration: not a probability until fitted, see --fit)"
    )
    best = best_threshold(items, threshold)
    if args.plot:
        write_histogram(args.plot, items, threshold, best.value if best else None)
    if args.json:
        # On p_correct's own scale (0-1) when a calibration decides.
        scale = 100.0 if cal is not None else 1.0
        context = header(
            threshold=threshold / scale,
            best=None if best is None else replace(best, value=best.value / scale),
            backend=backend,
            resamples=args.resamples,
            seed=args.seed,
            reformatted=args.reformat,
        )
        plot = {"plot": str(args.plot) if args.plot else None}
        extra = {
            "pass_rule": pass_rule,
            "calibration": None if cal is None else cal.describe(),
            "probability": "p_correct" if cal is not None else "raw_signal",
        }
        print(json.dumps({**context, **extra, **plot, **rep}, ensure_ascii=False))
        return
    print(
        render(
            rep,
            threshold=threshold,
            best=best,
            backend=backend,
            resamples=args.resamples,
            reformatted=args.reformat,
            probability=probability,
            pass_rule=pass_rule,
        )
    )
    if args.plot:
        print(f"\nplot: {args.plot}")


def _progress(total: int, show: bool) -> Callable[[int], None]:
    def progress(done: int) -> None:
        if show and (done == total or done % 25 == 0):
            print(f"\rjudged {done}/{total}", end="\n" if done == total else "", file=sys.stderr)

    return progress
