"""``stef estimate``: the agent's accuracy per app, from the judge's calibrated P(correct) and a
random sample of human labels (PPI++, :mod:`stef.accuracy`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from stef.accuracy import Estimate
from stef.errors import FileError
from stef.exits import Exit
from stef.report.figures import ALL, per_app
from stef.results_file import Record, read_results
from stef.review.labels import truth
from stef.text_table import render_table


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "estimate",
        help="the agent's accuracy with a 95%% confidence interval (judge + labels)",
        description="Power-tuned prediction-powered inference (PPI++): the mean of the judge's "
        "P(correct) over every evaluated record (calibrated, or a reference's where one "
        "decided), weighted and corrected by the labelled ones, with its 95% interval, per app; "
        "never wider than the interval from the labels alone, printed beside it. Only labels "
        "given in stef review's random order (or from a file "
        "that does not say) are used: labels picked by doubt are not a sample.",
    )
    p.add_argument("--results", type=Path, required=True, help="results JSONL")
    p.add_argument("--labels", type=Path, required=True, help="labels JSONL (stef review's)")
    p.add_argument(
        "--all-labels",
        action="store_true",
        help="use the labels of the teaching order too (biased toward doubtful records)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object, per app")
    p.set_defaults(func=run)


def estimates(records: list[Record], labels: dict[str, bool]) -> dict[str, Estimate]:
    """Per app (and ``(all)``), sorted by name: the estimate over its evaluated records, as the
    report's per-app table has it."""
    total, *apps = per_app(records, labels)
    # An app named "(all)" is within the total: one estimate of that name.
    rows = [total, *(g for g in apps if g.p_by_id and g.app != ALL)]
    return {g.app: g.accuracy for g in sorted(rows, key=lambda g: g.app) if g.accuracy is not None}


def run(args: argparse.Namespace) -> int:
    if not args.labels.exists():  # stef review starts a labels file; this one reads it
        print(f"stef estimate: {args.labels}: no such file", file=sys.stderr)
        return Exit.FAILURE
    try:
        records = read_results(args.results)
        labels = truth(args.labels, random_only=not args.all_labels)
        left_out = 0 if args.all_labels else len(truth(args.labels)) - len(labels)
    except FileError as exc:
        print(f"stef estimate: {exc}", file=sys.stderr)
        return Exit.FAILURE
    result = estimates(records, labels)
    if args.json:
        print(json.dumps({app: e.as_dict() for app, e in result.items()}))
        return Exit.OK
    print(render(result, left_out=left_out))
    return Exit.OK


def _ci(d: dict[str, Any] | None) -> str:
    if not d or d.get("estimate") is None:
        return "-"
    return f"{d['estimate']:.1%} [{d['low']:.1%}, {d['high']:.1%}]"


def render(result: dict[str, Estimate], *, left_out: int = 0) -> str:
    """The table, and a note per reason an estimate is missing. ``left_out``: the labels given
    in teaching order, not used (they favour doubtful records and would bias the estimate)."""
    rows = []
    for app, e in result.items():
        d = e.as_dict()
        labels_only = d["labels_only"]
        rows.append(
            [
                app,
                str(e.n),
                str(e.n_labelled),
                _ci(d),
                _ci(labels_only if isinstance(labels_only, dict) else None),
            ]
        )
    out = render_table(
        ["app", "records", "labelled", "judge + labels (95% CI)", "labels only"], rows
    )
    notes = []
    if any(e.missing_p for e in result.values()):
        notes.append(
            "no estimate where records have no judge.p_correct: it needs a calibrated judge; "
            "the labels-only interval stands alone"
        )
    if any(e.n_labelled < 2 for e in result.values()):
        notes.append("an estimate needs at least two labelled records of the app")
    if left_out:
        notes.append(
            f"{left_out} label{'s' if left_out > 1 else ''} given in teaching order "
            f"{'were' if left_out > 1 else 'was'} left out: that order puts doubtful records "
            "first, so they are no sample; label with stef review --order random (or pass "
            "--all-labels to use them anyway, biased)"
        )
    return "\n".join([out, *notes])
