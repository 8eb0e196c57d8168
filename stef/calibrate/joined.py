"""Agreement from results already judged: human labels joined to a results file by ``id``
(``stef calibrate --results R --labels L``), with no record judged again; and the records
where judge and label disagree, most confident first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stef.calibrate.agreement import Item
from stef.results_file import Record, read_results
from stef.review import records as R
from stef.review.labels import latest_labels


@dataclass(frozen=True)
class Joined:
    """The labelled results: ``items`` for the agreement report, ``pairs`` (result, label
    line) for the disagreement list, and how many labels named no result."""

    items: list[Item]
    pairs: list[tuple[Record, dict[str, Any]]]
    unmatched: int


def join(results: Path, labels: Path, input_log: Path | None = None) -> Joined:
    """Labels (true or false; skips left out) joined to the results they name.

    Raises:
        FileError: either file has a line that cannot be read.
    """
    by_id = {str(r["id"]): r for r in read_results(results, input_log)}
    pairs: list[tuple[Record, dict[str, Any]]] = []
    unmatched = 0
    for rid, line in latest_labels(labels).items():
        if not isinstance(line.get("label"), bool):
            continue
        rec = by_id.get(rid)
        if rec is None or rec.get("outcome") == "skipped_sampling":
            unmatched += 1
            continue
        pairs.append((rec, line))
    return Joined([_item(rec, line) for rec, line in pairs], pairs, unmatched)


def _item(rec: Mapping[str, Any], line: Mapping[str, Any]) -> Item:
    evaluated = rec.get("outcome") == "evaluated"
    components = rec.get("components")
    verdict = components.get("verdict") if isinstance(components, dict) else None
    raw = components.get("raw_signal") if isinstance(components, dict) else None
    app, complexity = rec.get("app"), rec.get("complexity")
    source = rec.get("source")
    return Item(
        label=bool(line["label"]),
        score=R.score(rec) if evaluated else None,
        source=source if isinstance(source, str) else None,
        app=app if isinstance(app, str) else None,
        complexity=complexity if isinstance(complexity, str) else None,
        verdict=verdict if isinstance(verdict, str) and evaluated else None,
        # The same probabilities as file mode: the raw signal and the calibrated p_correct.
        raw=float(raw) if evaluated and isinstance(raw, int | float) else None,
        p_correct=R.p_correct(rec) if evaluated else None,
    )


def disagreements(
    joined: Joined, threshold: float, n: int, *, on_p_correct: bool = False
) -> list[dict[str, Any]]:
    """The ``n`` labelled records the judge got wrong at ``threshold``, the most confidently
    wrong first (farthest from the threshold); judge errors are not listed. ``on_p_correct``:
    the pass rule reads p_correct x 100 (a calibration decides), else the score."""
    wrong: list[tuple[float, dict[str, Any]]] = []
    for rec, line in joined.pairs:
        score = R.score(rec)
        if on_p_correct:
            p = R.p_correct(rec)
            score = None if p is None else p * 100
        if rec.get("outcome") != "evaluated" or score is None:
            continue
        if (score >= threshold) == line["label"]:
            continue
        given = rec.get("input") if isinstance(rec.get("input"), dict) else {}
        wrong.append(
            (
                abs(score - threshold),
                {
                    "id": rec["id"],
                    "app": rec.get("app"),
                    "label": line["label"],
                    "score": R.score(rec),
                    "p_correct": R.p_correct(rec),
                    "issues": R.issues(rec),
                    "note": line.get("note") or "",
                    "question": given.get("question") if isinstance(given, dict) else None,
                },
            )
        )
    wrong.sort(key=lambda pair: (-pair[0], str(pair[1]["id"])))
    return [w for _, w in wrong[:n]]


def render_disagreements(rows: Sequence[Mapping[str, Any]], threshold: float) -> str:
    """The disagreement list as text, one block per record."""
    if not rows:
        return f"disagreements at {threshold:g}: none"
    out = [f"disagreements at {threshold:g} (most confident first):"]
    for r in rows:
        label = "correct" if r["label"] else "incorrect"
        p = "" if r["p_correct"] is None else f" p_correct {r['p_correct']:.2f}"
        # None: a result with p_correct but no score (the pass rule read p_correct).
        score = "-" if r["score"] is None else f"{r['score']:g}"
        out.append(
            f"  {r['id']}  app {r['app'] or '-'}  labelled {label}  score {score}{p}"
            f"  issues {', '.join(r['issues']) or '-'}"
        )
        if r["question"]:
            out.append(f"    question: {r['question']}")
        if r["note"]:
            out.append(f"    note: {r['note']}")
    return "\n".join(out)
