"""``stef calibrate LABELS``: agreement of the judge with human labels (:mod:`stef.calibrate`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import textwrap
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from stef.calibrate.agreement import DEFAULT_THRESHOLD, MIN_RESAMPLES, Item, best_threshold
from stef.calibrate.fit import fit, points_of
from stef.calibrate.joined import disagreements, join, render_disagreements
from stef.calibrate.labels import judge_all, without_sampling
from stef.calibrate.plot import write_histogram
from stef.calibrate.reference import generated_for, reference_agreement, render_reference
from stef.calibrate.report import header, render, render_fit, report
from stef.calibration import Calibration, judged_of
from stef.cli import integer, number
from stef.cli.common import add_common, preflight, report_error, settings_of
from stef.cli.conclusion import conclusion
from stef.cli.progress import Progress
from stef.cli.report import results_calibration
from stef.errors import FileError, StefError
from stef.exits import Exit
from stef.labels_file import LabelledRecord, read_labels
from stef.models import JudgeInfo
from stef.rules import RuleSet, load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="agreement with human labels",
        description="Agreement of the judge with human labels: Cohen's kappa with a bootstrap CI, "
        "balanced accuracy, sensitivity and specificity (positive class: correct), per source, "
        "app, complexity tier, error type and verdict.",
    )
    _add_judging_arguments(p)
    _add_figure_arguments(p)
    _add_joined_arguments(p)
    add_common(p, rules_help="rules file or directory (default: built-in defaults)")
    p.set_defaults(func=run)


def _add_judging_arguments(p: argparse.ArgumentParser) -> None:
    """The labelled file, how its records are judged, and what is printed or drawn."""
    p.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="JSONL of input records with a boolean 'label' (judged now); or give --results "
        "and --labels",
    )
    p.add_argument(
        "--pass-threshold",
        type=number(0, 100),
        default=DEFAULT_THRESHOLD,
        help="predict correct when score >= this (default 75)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", type=Path, help="write an SVG of score histograms here")
    p.add_argument(
        "--concurrency", type=integer(1), default=8, help="records in flight (default 8)"
    )
    p.add_argument("--limit", type=integer(1), help="judge only the first N records")
    p.add_argument("--reformat", action="store_true", help="re-format every SQL with sqlglot first")
    p.add_argument(
        "--reference-databases",
        type=integer(0),
        metavar="N",
        help="reference verdict: generated databases per record (default: the reference "
        "settings', 8); 0: structure only",
    )


def _add_figure_arguments(p: argparse.ArgumentParser) -> None:
    """The bootstrap, the progress line, the calibration fitted or applied, the drop window."""
    p.add_argument(
        "--resamples",
        type=integer(MIN_RESAMPLES),
        default=MIN_RESAMPLES,
        help=f"bootstrap resamples (default {MIN_RESAMPLES})",
    )
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
        type=integer(1),
        default=1000,
        help="records per window for the smallest detectable accuracy drop (default 1000)",
    )


def _add_joined_arguments(p: argparse.ArgumentParser) -> None:
    """``--results`` and ``--labels``: labels joined to results already judged."""
    p.add_argument(
        "--results", type=Path, help="results already judged (JSONL), joined to --labels by id"
    )
    p.add_argument("--labels", type=Path, help="labels JSONL (stef review's), with --results")
    p.add_argument("--input", type=Path, help="the agent log, to show questions by id")
    p.add_argument(
        "--disagreements",
        type=integer(0),
        default=10,
        help="with --results: list this many records judge and label disagree on (default 10)",
    )


def run(args: argparse.Namespace) -> int:
    """``stef calibrate ...``; returns the exit status."""
    if args.results is not None or args.labels is not None or args.file is None:
        return _run_joined(args)
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    settings, records, rules = loaded
    judged = _judge(args, settings, rules, records)
    if isinstance(judged, int):
        return judged
    items, info, cal = judged
    items, invalid = [i for i in items if i.invalid is None], [i for i in items if i.invalid]
    if invalid:
        print(_invalid_line(invalid, len(records), settings.field_mapping), file=sys.stderr)
        if not items:
            return Exit.FAILURE
    if args.fit is not None:
        return _fit(args, items, info)
    generated = generated_for(
        settings.reference, settings.limits.max_record_cpu_s, args.reference_databases
    )
    with_reference = reference_agreement(
        records, rules, reformat=args.reformat, generated=generated
    )
    _print_report(args, items, info.backend, cal, with_reference)
    return Exit.OK


def _load(args: argparse.Namespace) -> tuple[Settings, list[LabelledRecord], RuleSet] | int:
    """The settings (checked by the preflight), the labelled records and the rules (without
    sampling: every labelled record is judged); or the exit status."""
    try:
        # The labels file is in STEF's field names, or in the agent's with --config's
        # field_mapping (each record then goes to the judge whole, less label and reference).
        settings = settings_of(args, {"calibration": args.calibration})
        records = read_labels(args.file, args.limit, mapped=settings.mapping)
        rules = without_sampling(load_rules(settings.rules))
    except (FileError, ValueError) as exc:
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
    return settings, records, rules


def _judge(
    args: argparse.Namespace, settings: Settings, rules: RuleSet, records: list[LabelledRecord]
) -> tuple[list[Item], JudgeInfo, Calibration | None] | int:
    """Every labelled record judged by the configured backend (closed after): the items, the
    judge's description and the calibration it applied; or the exit status of a failed start."""
    progress = Progress(len(records), sys.stderr.isatty() and not args.no_progress)
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
            on_progress=progress.update_to,
        )
    progress.close()
    return items, backend.info, pipeline.options.calibration


def _invalid_line(invalid: list[Item], total: int, mapping: dict[str, str]) -> str:
    """The line saying how many labelled records were not valid input (left out of every
    figure, never counted as judge errors), with the commonest reason and its likely cause."""
    reasons = Counter(i.invalid for i in invalid)
    reason, count = reasons.most_common(1)[0]
    hint = ""
    if reason == "missing_field":
        hint = (
            f"; field_mapping is {mapping}" if mapping else "; no field_mapping is set"
        ) + " (a --config file with field_mapping reads the agent's own field names)"
    every = "every one" if len(invalid) == total else f"{len(invalid)}"
    return (
        f"stef calibrate: {every} of {total} labelled records is not valid input, left out "
        f"(most common: {reason}, {count}){hint}"
    )


def _fit(args: argparse.Namespace, items: list[Item], info: JudgeInfo) -> int:
    """Fit a calibration on the raw signal (whatever calibration is loaded), write it, say what
    it does across sources."""
    points = points_of(items, args.pass_threshold)
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
    args: argparse.Namespace,
    items: list[Item],
    backend: str,
    cal: Calibration | None,
    with_reference: dict[str, Any],
) -> None:
    items, threshold, pass_rule = _decided(items, cal, args.pass_threshold)
    rep = report(items, threshold, resamples=args.resamples, seed=args.seed, window=args.window)
    probability = (
        f"p_correct (calibration: {cal.describe()})"
        if cal is not None
        else "the raw signal (no calibration: not a probability until fitted, see --fit)"
    )
    best = best_threshold(items, threshold)
    if args.plot:
        axis = "score" if cal is None else "P(correct) x 100"
        write_histogram(args.plot, items, threshold, best.value if best else None, x_label=axis)
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
        reference = {"reference": with_reference}
        print(json.dumps({**context, **extra, **plot, **rep, **reference}, ensure_ascii=False))
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
    print("\n" + "\n".join(textwrap.wrap(conclusion(rep), 100)))
    if with_reference["n"]:
        print(render_reference(with_reference))
    if args.plot:
        print(f"\nplot: {args.plot}")


def _decided(
    items: list[Item], cal: Calibration | None, threshold: float
) -> tuple[list[Item], float, str]:
    """The items, threshold and pass rule of the agreement tables: with a calibration, pass is
    p_correct >= the threshold fitted with it (the tables read p_correct x 100 where they read
    the score); without, score >= ``threshold``. File mode and --results mode alike."""
    if cal is None:
        return items, threshold, f"score >= {threshold:g}"
    items = [replace(i, score=None if i.p_correct is None else i.p_correct * 100) for i in items]
    return items, cal.threshold * 100, f"p_correct >= {cal.threshold:g}"


def _run_joined(args: argparse.Namespace) -> int:
    """``stef calibrate --results R --labels L``: labels joined to judged results by id."""
    if args.file is not None or args.results is None or args.labels is None:
        print(
            "stef calibrate: give a labelled input file, or --results and --labels (not both)",
            file=sys.stderr,
        )
        return Exit.USAGE
    try:
        joined = join(args.results, args.labels, args.input)
    except FileError as exc:
        print(f"stef calibrate: {exc}", file=sys.stderr)
        return Exit.FAILURE
    if not joined.items:
        print(
            f"stef calibrate: no label in {args.labels} names a judged result of {args.results}",
            file=sys.stderr,
        )
        return Exit.FAILURE
    try:
        cal = results_calibration([rec for rec, _ in joined.pairs], args.calibration)
    except StefError as exc:
        return report_error("stef calibrate", exc)
    backends = sorted({_backend(rec) for rec, _ in joined.pairs})
    items, threshold, pass_rule = _decided(joined.items, cal, args.pass_threshold)
    rows = disagreements(joined, threshold, args.disagreements, on_p_correct=cal is not None)
    extra = {
        "labels_unmatched": joined.unmatched,
        "disagreements": rows,
        "pass_rule": pass_rule,
        "calibration": None if cal is None else cal.describe(),
        "probability": "p_correct" if cal is not None else "raw_signal",
    }
    tail = render_disagreements(rows, threshold)
    if joined.unmatched:
        tail = f"{tail}\n\n{joined.unmatched} labels name no judged result (left out)"
    _print_joined(args, items, "+".join(backends), extra, (threshold, cal, tail))
    return Exit.OK


def _backend(rec: dict[str, Any]) -> str:
    judge = rec.get("judge")
    return str(judge.get("backend")) if isinstance(judge, dict) else "unknown"


def _print_joined(
    args: argparse.Namespace,
    items: list[Item],
    backend: str,
    extra: dict[str, object],
    decided: tuple[float, Calibration | None, str],
) -> None:
    """The agreement report of joined labels, then the disagreements (in JSON: more keys)."""
    threshold, cal, tail = decided
    rep = report(items, threshold, resamples=args.resamples, seed=args.seed, window=args.window)
    best = best_threshold(items, threshold)
    if args.plot:
        write_histogram(args.plot, items, threshold, best.value if best else None)
    if args.json:
        scale = 100.0 if cal is not None else 1.0
        context = header(
            threshold=threshold / scale,
            best=None if best is None else replace(best, value=best.value / scale),
            backend=backend,
            resamples=args.resamples,
            seed=args.seed,
            reformatted=False,
        )
        plot = {"plot": str(args.plot) if args.plot else None}
        print(json.dumps({**context, **plot, **rep, **extra}, ensure_ascii=False))
        return
    probability = (
        f"p_correct (calibration: {cal.describe()})"
        if cal is not None
        else "the raw signal (no calibration: not a probability until fitted, see --fit)"
    )
    print(
        render(
            rep,
            threshold=threshold,
            best=best,
            backend=backend,
            resamples=args.resamples,
            reformatted=False,
            probability=probability,
            pass_rule=str(extra["pass_rule"]),
        )
    )
    print("\n" + "\n".join(textwrap.wrap(conclusion(rep), 100)))
    if args.plot:
        print(f"\nplot: {args.plot}")
    print(f"\n{tail}")
