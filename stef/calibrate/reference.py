"""Agreement of the reference verdict with the labels: the labelled records that carry a
``gold_sql``, compared with it by the reference stage (no judge; generated databases unless
turned off, never a configured database).

The figures come pooled, per source, and apart for the records the execution decided (rows on
generated databases) and those the structure decided (the databases could not tell, or were
not used), with the share of each and the time the databases took per record."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stef.accuracy import auc
from stef.calibrate.agreement import confusion, kappa
from stef.calibrate.labels import reformat_sql
from stef.calibrate.measures import Scored, ece
from stef.labels_file import LabelledRecord
from stef.models import PASSING_VERDICTS, Reference
from stef.rules import RuleSet
from stef.settings import ReferenceSettings
from stef.stages.normalize import question_cues
from stef.stages.reference import reference
from stef.stages.reference_generated import Generated, run_generated
from stef.stages.sqlspec import sqlspec


@dataclass(frozen=True)
class _Compared:
    label: bool
    passed: bool
    p: float
    source: str
    decided_by: str
    outcome: str
    ms: float | None


def generated_for(
    settings: ReferenceSettings, cpu_limit_s: float, count: int | None
) -> Generated | None:
    """The generated databases of the reference figures: ``count`` of them (None: the
    settings'; 0, or ``reference.generate: false``: structure only), at most 64, each run
    within the record CPU limit."""
    count = settings.databases if count is None else count
    if count <= 0 or not settings.generate:
        return None
    timeout_s = min(settings.timeout_s, cpu_limit_s)
    return Generated(databases=min(count, 64), timeout_s=timeout_s, max_rows=settings.max_rows)


def reference_agreement(
    records: Sequence[LabelledRecord],
    rules: RuleSet,
    *,
    reformat: bool = False,
    generated: Generated | None = None,
) -> dict[str, Any]:
    """``{kappa, auc, ece, n}`` of the reference verdict against the labels, over the records
    with a reference (it passes at Correct or Likely Correct; ``auc`` and ``ece`` read
    ``p_correct``), and the same ``by_source`` and ``by_decided`` (``execution``,
    ``structure``); ``decided`` gives each way's share (``counterexample``: a generated
    database told the queries apart; ``execution_same``: the rows agreed; ``structure``: the
    databases were not used; ``fallback``: they could not tell or run) and ``execution_ms`` the
    p50/p99 time of the databases per record. ``kappa``, ``auc`` and ``ece`` are None when
    fewer than both label classes are compared."""
    compared = [c for rec in records if (c := _compare(rec, rules, reformat, generated))]
    by_source: dict[str, list[_Compared]] = defaultdict(list)
    by_decided: dict[str, list[_Compared]] = defaultdict(list)
    for c in compared:
        by_source[c.source].append(c)
        by_decided[c.decided_by].append(c)
    times = sorted(c.ms for c in compared if c.ms is not None)
    return {
        **_figures(compared),
        "generated_databases": None if generated is None else generated.databases,
        "by_source": {k: _figures(v) for k, v in sorted(by_source.items())},
        "by_decided": {k: _figures(v) for k, v in sorted(by_decided.items())},
        "decided": _shares(compared),
        "execution_ms": {"p50": _quantile(times, 0.5), "p99": _quantile(times, 0.99)},
    }


def _compare(
    rec: LabelledRecord, rules: RuleSet, reformat: bool, generated: Generated | None
) -> _Compared | None:
    sql, question = rec.payload.get("sql"), rec.payload.get("question")
    if rec.gold_sql is None or not isinstance(sql, str) or not isinstance(question, str):
        return None
    app, dialect = rec.payload.get("app"), rec.payload.get("dialect")
    dialect = dialect or rules.for_app(app if isinstance(app, str) else None).dialect
    if reformat:
        sql = reformat_sql(sql, dialect)
    cues = question_cues(question)
    ordered = cues.ordering_requested or cues.top_k is not None
    ref = reference(sql, rec.gold_sql, dialect, ordering_requested=ordered)
    if ref.verdict is None or ref.p_correct is None:
        return None  # the reference itself does not parse: nothing was compared
    ref = ref.model_copy(update={"decided_by": "structure"})
    started = time.perf_counter()
    if generated is not None:
        spec = sqlspec(sql, dialect)
        asked_at = rec.payload.get("timestamp")
        asked_at = asked_at if isinstance(asked_at, str) else None
        ref = run_generated(
            ref, spec, sql, rec.gold_sql, dialect, ordered, generated, asked_at=asked_at
        )
    ms = (time.perf_counter() - started) * 1000 if generated is not None else None
    if ref.verdict is None or ref.p_correct is None:
        return None
    return _Compared(
        label=rec.label,
        passed=ref.verdict in PASSING_VERDICTS,
        p=ref.p_correct,
        source=rec.source or "unknown",
        decided_by=ref.decided_by or "structure",
        outcome=_outcome(ref, generated is not None),
        ms=ms,
    )


def _outcome(ref: Reference, generated: bool) -> str:
    if ref.decided_by == "execution":
        status = ref.execution.status if ref.execution is not None else ""
        return "counterexample" if status == "different" else "execution_same"
    return "fallback" if generated else "structure"


def _figures(items: Sequence[_Compared]) -> dict[str, Any]:
    labels = [c.label for c in items]
    k = kappa(confusion(labels, [c.passed for c in items]))
    a = auc(labels, [c.p for c in items])
    e = ece([Scored(p=c.p, label=c.label) for c in items]) if items else None
    return {
        "kappa": None if k is None else round(k, 4),
        "auc": None if a is None else round(a, 4),
        "ece": None if e is None else round(e, 4),
        "n": len(items),
    }


def _shares(items: Sequence[_Compared]) -> dict[str, float]:
    if not items:
        return {}
    counts: dict[str, int] = defaultdict(int)
    for c in items:
        counts[c.outcome] += 1
    return {k: round(v / len(items), 4) for k, v in sorted(counts.items())}


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * len(values)))], 2)


def render_reference(figures: dict[str, Any]) -> str:
    """The reference figures as text: pooled, by way of deciding, by source, and the shares."""
    databases = figures.get("generated_databases")
    how = f"{databases} generated databases a record" if databases else "structure only"
    lines = [f"\nreference verdict (records with gold_sql, {how}):", _line("all", figures)]
    lines += [_line(f"decided by {k}", v) for k, v in figures["by_decided"].items()]
    lines += [_line(k, v) for k, v in figures["by_source"].items()]
    shares = ", ".join(f"{k} {v:.1%}" for k, v in figures["decided"].items())
    lines.append(f"  decided: {shares}")
    ms = figures["execution_ms"]
    if ms["p50"] is not None:
        lines.append(f"  databases per record: p50 {ms['p50']} ms, p99 {ms['p99']} ms")
    return "\n".join(lines)


def _line(name: str, f: dict[str, Any]) -> str:
    return f"  {name:<34} n={f['n']:<5} kappa {f['kappa']}  auc {f['auc']}  ece {f['ece']}"
