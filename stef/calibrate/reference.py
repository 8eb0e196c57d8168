"""Agreement of the reference verdict with the labels: the labelled records that carry a
``gold_sql``, compared with it by the reference stage (no judge, no database)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stef.accuracy import auc
from stef.calibrate.agreement import confusion, kappa
from stef.calibrate.labels import Labelled, reformat_sql
from stef.models import PASSING_VERDICTS
from stef.rules import RuleSet
from stef.stages.normalize import question_cues
from stef.stages.reference import reference


def reference_agreement(
    records: Sequence[Labelled], rules: RuleSet, *, reformat: bool = False
) -> dict[str, Any]:
    """``{kappa, auc, n}`` of the reference verdict against the labels, over the records with a
    reference: it passes at Correct or Likely Correct; ``auc`` ranks by ``p_correct``.
    ``kappa`` and ``auc`` are None when fewer than both label classes are compared."""
    labels: list[bool] = []
    passed: list[bool | None] = []
    scores: list[float] = []
    for rec in records:
        sql, question = rec.payload.get("sql"), rec.payload.get("question")
        if rec.gold_sql is None or not isinstance(sql, str) or not isinstance(question, str):
            continue
        app, dialect = rec.payload.get("app"), rec.payload.get("dialect")
        dialect = dialect or rules.for_app(app if isinstance(app, str) else None).dialect
        if reformat:
            sql = reformat_sql(sql, dialect)
        cues = question_cues(question)
        ref = reference(
            sql,
            rec.gold_sql,
            dialect,
            ordering_requested=cues.ordering_requested or cues.top_k is not None,
        )
        if ref.verdict is None or ref.p_correct is None:
            continue  # the reference itself does not parse: nothing was compared
        labels.append(rec.label)
        passed.append(ref.verdict in PASSING_VERDICTS)
        scores.append(ref.p_correct)
    k = kappa(confusion(labels, passed))
    a = auc(labels, scores)
    return {
        "kappa": None if k is None else round(k, 4),
        "auc": None if a is None else round(a, 4),
        "n": len(labels),
    }
