"""The label rates behind reference mode's ``P_EXECUTION`` and ``P_SAME``
(:mod:`stef.stages.reference_generated`), measured on a labelled file with ``gold_sql``.

    .venv/bin/python scripts/reference_rates.py ../shared/data/judge-dev.jsonl
    .venv/bin/python scripts/reference_rates.py FILE --reformat --dump outcomes.jsonl

Each record is compared with its gold as the record path does (the structural comparison, then
the generated databases: :func:`run_generated`), and the share labelled correct is
printed for each execution outcome: ``different`` (apart where the two group by an entity's key
and by its name) and ``duplicates`` pooled, ``same`` by the
structure's verdict (and, for a structural ``Incorrect``, by whether every differing component
is one the generated databases cannot always exercise: ``limit``, ``order_by``). The structure's
verdict stands (a fallback) where the databases cannot exercise a LIMIT or ORDER BY difference.
``--dump`` writes one JSON line per record (its outcome, structural verdict and components, the
final verdict and ``p_correct``, label, time), from which κ under other rates can be recomputed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stef.accuracy import auc  # noqa: E402
from stef.calibrate.agreement import confusion, kappa  # noqa: E402
from stef.calibrate.labels import reformat_sql  # noqa: E402
from stef.labels_file import read_labels  # noqa: E402
from stef.stages.normalize import question_cues  # noqa: E402
from stef.stages.reference import reference  # noqa: E402
from stef.stages.reference_generated import (  # noqa: E402
    DEFAULT_GENERATED,
    KEYED_GROUPS,
    UNEXERCISED,
    run_generated,
)
from stef.stages.sqlspec import sqlspec  # noqa: E402


def outcome(payload: dict[str, Any], gold: str, reformat: bool) -> dict[str, Any] | None:
    """One record's structural verdict and raw execution outcome; None: the gold does not
    parse or the record has no SQL or question."""
    sql, question = payload.get("sql"), payload.get("question")
    if not isinstance(sql, str) or not isinstance(question, str):
        return None
    dialect = payload.get("dialect")
    if reformat:
        sql = reformat_sql(sql, dialect)
    cues = question_cues(question)
    ordered = cues.ordering_requested or cues.top_k is not None
    ref = reference(sql, gold, dialect, ordering_requested=ordered)
    if ref.verdict is None:
        return None
    started = time.perf_counter()
    asked_at = payload.get("timestamp")
    found = run_generated(
        ref,
        sqlspec(sql, dialect),
        sql,
        gold,
        dialect,
        ordered,
        DEFAULT_GENERATED,
        asked_at=asked_at if isinstance(asked_at, str) else None,
    )
    execution = found.execution
    return {
        "structure": str(ref.verdict),
        "components": sorted({d.component for d in ref.differences}),
        "status": "not_run" if execution is None else execution.status,
        "informative": 0 if execution is None else execution.informative or 0,
        "unexercised": (found.error or "").startswith("execution_unexercised"),
        "keyed_groups": execution is not None and execution.detail == KEYED_GROUPS,
        "verdict": str(found.verdict),
        "p_correct": found.p_correct,
        "ms": round((time.perf_counter() - started) * 1000, 2),
    }


def group(row: dict[str, Any]) -> str:
    if row["status"] == "different" and row["keyed_groups"]:
        return "different, grouped by an entity's key or its name"
    if row["status"] in ("different", "duplicates"):
        return row["status"]
    if row["status"] != "same":
        return f"fallback ({row['status']})"
    if row["unexercised"]:
        return "fallback (same, LIMIT/ORDER BY unexercised)"
    key = f"same, structure {row['structure']}"
    if row["structure"] == "Incorrect" and row["components"]:
        only = set(row["components"]) <= UNEXERCISED
        key += ", only limit/order_by" if only else ", other components"
    return key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("labels", type=Path)
    parser.add_argument("--reformat", action="store_true", help="re-format every SQL first")
    parser.add_argument("--dump", type=Path, help="write each record's outcome here (JSONL)")
    args = parser.parse_args()
    rows = []
    for rec in read_labels(args.labels):
        if rec.gold_sql is None:
            continue
        row = outcome(rec.payload, rec.gold_sql, args.reformat)
        if row is not None:
            rows.append({"id": rec.payload.get("id"), "label": rec.label, **row})
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        row["group"] = group(row)
        counts[row["group"]][0] += 1
        counts[row["group"]][1] += int(row["label"])
    print(f"{len(rows)} records with a readable gold_sql")
    for key, (n, correct) in sorted(counts.items()):
        print(f"  {key:<50} n={n:>5}  labelled correct {correct / n:.3f}")
    for structure in ("Correct", "Likely Correct", "Incorrect"):
        same = [r for r in rows if r["group"].startswith(f"same, structure {structure}")]
        if same:
            share = sum(r["label"] for r in same) / len(same)
            print(f"  P_SAME[{structure}] {share:.3f} (n={len(same)})")
    labels = [r["label"] for r in rows]
    passed = [r["verdict"] in ("Correct", "Likely Correct") for r in rows]
    area = auc(labels, [r["p_correct"] for r in rows])
    print(f"  kappa {kappa(confusion(labels, passed))}, AUC {area}")
    times = sorted(r["ms"] for r in rows)
    print(f"  p50 {times[len(times) // 2]} ms, p99 {times[int(0.99 * len(times))]} ms a record")
    if args.dump is not None:
        with args.dump.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
