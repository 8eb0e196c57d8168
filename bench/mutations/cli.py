"""The benchmark's command line: read the golds, generate the variants, judge, write the report."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.mutations.generate import SEED, TYPES, generate
from bench.mutations.golds import GoldsError, read_golds
from bench.mutations.judging import default_pipeline, judge_all
from bench.mutations.report import figures, markdown, row_of
from bench.mutations.sites import build_pool

ROOT = Path(__file__).resolve().parent.parent.parent
DEV_SET = ROOT.parent / "shared" / "data" / "judge-dev.jsonl"
OUT = ROOT / "build" / "mutations"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.mutations",
        description="Gold SQL and variants that change one thing the question names (wrong) or "
        "keep its meaning (right), judged by STEF's default heuristic pipeline.",
    )
    p.add_argument(
        "--labels",
        type=Path,
        default=Path(os.environ.get("EVAL_LABELS") or DEV_SET),
        help="labelled JSON lines with gold_sql (default ../shared/data/judge-dev.jsonl, or "
        "EVAL_LABELS)",
    )
    p.add_argument("--limit", type=int, default=None, help="the first N golds only")
    p.add_argument(
        "--types", nargs="+", default=None, help=f"variant types (default all): {', '.join(TYPES)}"
    )
    p.add_argument(
        "--reference", action="store_true", help="judge each variant with its gold as gold_sql"
    )
    p.add_argument("--out", type=Path, default=OUT, help="where the report goes (build/mutations)")
    p.add_argument("--seed", type=int, default=SEED)
    return p


def _types(given: list[str] | None) -> list[str] | str:
    """The types asked for (commas or spaces), or the message naming an unknown one."""
    if not given:
        return list(TYPES)
    names = [n for g in given for n in g.split(",") if n]
    unknown = [n for n in names if n not in TYPES]
    if unknown:
        return f"unknown type {', '.join(unknown)}; one of {', '.join(TYPES)}"
    return list(dict.fromkeys(names))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    types = _types(args.types)
    if isinstance(types, str) or (args.limit is not None and args.limit < 1):
        why = types if isinstance(types, str) else "--limit must be at least 1"
        print(f"bench.mutations: {why}", file=sys.stderr)
        return 2
    try:
        golds, without = read_golds(args.labels)
    except GoldsError as exc:
        print(f"bench.mutations: {exc}", file=sys.stderr)
        return 2
    report = run(golds[: args.limit] if args.limit else golds, types, args, argv)
    report["golds"]["without_gold_sql"] = without
    write(args.out, report)
    print(markdown(report))
    return 0


def run(
    golds: list[Any], types: list[str], args: argparse.Namespace, argv: list[str] | None
) -> dict[str, Any]:
    """Generate and judge; the report with every row."""
    cpu, started = time.process_time(), time.monotonic()
    pool = build_pool(golds)
    judged, unread = generate(golds, pool, types, args.seed)
    generating = time.monotonic() - started
    pipeline = default_pipeline()
    started = time.monotonic()
    rows = judge_all(pipeline, judged, reference=args.reference)
    judging = time.monotonic() - started
    count = len(judged) + sum(len(j.variants) for j in judged)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(
            ["python -m bench.mutations", *(argv if argv is not None else sys.argv[1:])]
        ),
        "labels": args.labels.name,
        "reference": args.reference,
        "seed": args.seed,
        "types": types,
        "golds": {"read": len(golds), "judged": len(judged), "unparsed": unread},
        "judgments": count,
        "seconds": {
            "generating": round(generating, 2),
            "judging": round(judging, 2),
            "per_judgment": round(judging / count, 5) if count else 0.0,
            "cpu": round(time.process_time() - cpu, 2),
        },
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "figures": figures(rows, reference=args.reference),
        "rows": [row_of(r) for r in rows],
    }


def write(out: Path, report: dict[str, Any]) -> None:
    name = "mutations-reference" if report["reference"] else "mutations"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown(report), encoding="utf-8")
