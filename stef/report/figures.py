"""The figures of the report, computed from results read as plain objects."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stef.accuracy import Estimate, LabelFree, with_labels
from stef.calibration import Calibration
from stef.results_file import Record
from stef.review import records as R
from stef.stats import quantile
from stef.summary import verdict_class

TIERS = ("excellent", "good", "marginal", "poor")
ALL = "(all)"


@dataclass
class AppFigures:
    """One row of the per-app table."""

    app: str
    records: int = 0
    evaluated: int = 0
    skipped: int = 0
    tiers: Counter[str] = field(default_factory=Counter)
    scores: list[float] = field(default_factory=list)
    p_correct: dict[str, float | None] = field(default_factory=dict)
    unsafe: int = 0
    judge_errors: Counter[str] = field(default_factory=Counter)
    needs_review: int = 0
    cost_usd: float = 0.0
    priced: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    accuracy: Estimate | None = None
    label_free: LabelFree | None = None
    verdicts: Counter[str] = field(default_factory=Counter)
    issues: Counter[str] = field(default_factory=Counter)

    def quantile(self, q: float) -> float | None:
        return quantile(self.scores, q) if self.scores else None


def error_reason(error: object) -> str:
    """The reason of a judge error: the text before its first colon (``timeout: ...``)."""
    text = error if isinstance(error, str) and error else "unknown"
    return text.split(":", 1)[0].strip() or "unknown"


def release_of(rec: Record) -> str:
    """``app agent@version`` of a record: one row of the per-release table."""
    app = rec.get("app") if isinstance(rec.get("app"), str) else "(none)"
    agent = rec.get("agent") if isinstance(rec.get("agent"), str) else "-"
    version = rec.get("agent_version")
    return f"{app} {agent}@{version}" if isinstance(version, str) and version else f"{app} {agent}"


def _app_of(rec: Record) -> str:
    return str(rec.get("app")) if isinstance(rec.get("app"), str) else "(none)"


def per_app(
    records: Sequence[Record],
    labels: Mapping[str, bool],
    calibration: Calibration | None = None,
    *,
    by_release: bool = False,
) -> list[AppFigures]:
    """The rows of the per-app table (per release: ``by_release``), the total row first;
    ``calibration`` (the one the results were judged with) gives the label-free estimate."""
    key = release_of if by_release else _app_of
    groups: dict[str, AppFigures] = {ALL: AppFigures(ALL)}
    for rec in records:
        name = key(rec)
        for g in (groups[ALL], groups.setdefault(name, AppFigures(name))):
            _add(g, rec)
    for g in groups.values():
        g.accuracy = with_labels(g.p_correct, labels)
        known = [p for p in g.p_correct.values() if p is not None]
        if calibration is not None and known:
            squares = sum(p * p for p in known)
            g.label_free = calibration.label_free(len(known), sum(known), squares)
    return [groups[ALL], *(groups[k] for k in sorted(groups) if k != ALL)]


def _add(g: AppFigures, rec: Record) -> None:
    g.records += 1
    outcome = rec.get("outcome")
    if outcome == "skipped_sampling":
        g.skipped += 1
    elif outcome == "judge_error":
        g.judge_errors[error_reason(rec.get("error"))] += 1
    elif outcome == "evaluated":
        g.evaluated += 1
        g.p_correct[str(rec["id"])] = R.p_correct(rec)
        s = R.score(rec)
        if s is not None:
            g.scores.append(s)
        if isinstance(rec.get("tier"), str):
            g.tiers[rec["tier"]] += 1
        _add_verdict(g, rec)
    g.unsafe += R.unsafe(rec)
    g.needs_review += rec.get("needs_review") is True
    raw = rec.get("usage")
    usage: dict[str, Any] = raw if isinstance(raw, dict) else {}
    cost = usage.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        g.cost_usd += float(cost)
        g.priced += 1
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(g, key, getattr(g, key) + value)


def _add_verdict(g: AppFigures, rec: Record) -> None:
    components = rec.get("components")
    if isinstance(components, dict):
        verdict, status = components.get("verdict"), components.get("filter_status")
        kind = verdict_class(
            verdict if isinstance(verdict, str) else None,
            status if isinstance(status, str) else None,
        )
        if kind is not None:
            g.verdicts[kind] += 1
    g.issues.update(i for i in R.issues(rec) if i != "none")


def worst(records: Sequence[Record], n: int) -> list[Record]:
    """The ``n`` evaluated records with the lowest score (lowest P(correct) on a tie)."""
    scored = [r for r in records if r.get("outcome") == "evaluated" and R.score(r) is not None]
    scored.sort(key=lambda r: (R.score(r), R.p_correct(r) or 0.0, str(r.get("id"))))
    return scored[:n]


def reliability(
    records: Sequence[Record], labels: Mapping[str, bool], *, bins: int = 10
) -> tuple[str, list[tuple[float, float, int]]]:
    """Labelled records binned by the judge's prediction: ``(mean predicted, share labelled
    correct, n)`` per non-empty bin. The prediction is P(correct) when every labelled record
    has one (``"p_correct"``), else the score over 100 (``"score"``: how accuracy follows the
    score, not a calibration)."""
    labelled = [r for r in records if r.get("id") in labels and r.get("outcome") == "evaluated"]
    use_p = bool(labelled) and all(R.p_correct(r) is not None for r in labelled)
    sums: dict[int, list[float]] = {}
    for r in labelled:
        x = (R.p_correct(r) or 0.0) if use_p else (R.score(r) or 0.0) / 100
        b = min(bins - 1, int(x * bins))
        acc = sums.setdefault(b, [0.0, 0.0, 0.0])
        acc[0] += x
        acc[1] += 1.0 if labels[str(r["id"])] else 0.0
        acc[2] += 1
    points = [(s / n, c / n, int(n)) for _, (s, c, n) in sorted(sums.items())]
    return ("p_correct" if use_p else "score"), points
