"""The benchmark's figures per variant type, as JSON and as a markdown table.

Without a reference: detection is the share of wrong variants scored strictly lower than their
gold, invariance the share of right variants scored exactly the same. With ``--reference`` (each
variant judged with its gold as ``gold_sql``): the share of wrong variants the reference calls
``Incorrect``, of right ones ``Correct``; ``identity`` is the gold judged against itself.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from bench.mutations.generate import TYPES
from bench.mutations.judging import Scored


def _share(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def _heuristic(rows: Sequence[Scored], kind: str) -> dict[str, Any]:
    judged = [r for r in rows if r.outcome.score is not None and r.gold.score is not None]
    lower = sum(r.outcome.score < r.gold.score for r in judged)  # type: ignore[operator]
    equal = sum(r.outcome.score == r.gold.score for r in judged)
    hit = lower if kind == "wrong" else equal
    return {
        "kind": kind,
        "n": len(rows),
        "unscored": len(rows) - len(judged),
        "lower": lower,
        "equal": equal,
        "higher": len(judged) - lower - equal,
        "measure": "detection" if kind == "wrong" else "invariance",
        "share": _share(hit, len(rows)),
    }


def _reference(rows: Sequence[Scored], kind: str) -> dict[str, Any]:
    verdicts = Counter(r.outcome.reference_verdict or "none" for r in rows)
    want = "Incorrect" if kind == "wrong" else "Correct"
    components = Counter(c for r in rows for c in r.outcome.reference_components)
    return {
        "kind": kind,
        "n": len(rows),
        "verdicts": dict(sorted(verdicts.items())),
        "measure": f"share {want}",
        "share": _share(verdicts[want], len(rows)),
        "differing_components": dict(components.most_common()),
    }


def figures(rows: Sequence[Scored], *, reference: bool) -> dict[str, Any]:
    """Per type, and over all wrong and all right variants (``identity`` left out)."""
    by_type: dict[str, list[Scored]] = defaultdict(list)
    for r in rows:
        by_type[r.variant.type].append(r)
    measure = _reference if reference else _heuristic
    order = ["identity", *TYPES] if reference else list(TYPES)
    types = {t: measure(by_type[t], "right" if t == "identity" else TYPES[t]) for t in order}
    overall = {
        kind: measure(
            [r for r in rows if r.variant.kind == kind and r.variant.type != "identity"], kind
        )
        for kind in ("wrong", "right")
    }
    return {"types": types, "overall": overall}


def row_of(r: Scored) -> dict[str, Any]:
    return {
        **asdict(r.variant),
        "gold_score": r.gold.score,
        "score": r.outcome.score,
        "verdict": r.outcome.verdict,
        "reference_verdict": r.outcome.reference_verdict,
        "reference_components": list(r.outcome.reference_components),
        "error": r.outcome.error,
    }


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown(report: dict[str, Any]) -> str:
    """The table of one run: a line per type, then the totals."""
    reference = report["reference"]
    figs = report["figures"]
    head = "share Incorrect / Correct" if reference else "detection / invariance"
    mode = "reference mode" if reference else "heuristic"
    golds, seconds = report["golds"], report["seconds"]
    lines = [
        f"# Mutation benchmark ({mode}, {report['date']})",
        "",
        f"Command: `{report['command']}`. Golds: {golds['judged']} of {golds['read']} "
        f"(deduplicated by question and gold_sql; {golds['unparsed']} unreadable by sqlglot). "
        f"{report['judgments']} judgments in {seconds['judging']:.0f} s "
        f"({seconds['per_judgment'] * 1000:.1f} ms each), variants generated in "
        f"{seconds['generating']:.0f} s; {seconds['cpu']:.0f} s of CPU in all.",
        "",
        f"| type | kind | n | {head} |" + ("" if reference else " lower | equal | higher |"),
        "| --- | --- | --- | --- |" + ("" if reference else " --- | --- | --- |"),
    ]
    for name, f in [*figs["types"].items(), *((f"all {k}", v) for k, v in figs["overall"].items())]:
        cells = [name, f["kind"], str(f["n"]), _cell(f["share"])]
        if not reference:
            cells += [str(f["lower"]), str(f["equal"]), str(f["higher"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
