"""The figures of the report, computed from results read as plain objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stef.accuracy import Estimate, LabelFree, with_labels
from stef.calibration import Calibration
from stef.results_file import Record
from stef.review import records as R
from stef.stats import quantile
from stef.summary import Counted, Group, verdict_class

ALL = "(all)"


@dataclass
class AppFigures(Group):
    """One row of the per-app table: the counters ``stef summary`` keeps (:class:`Group`), and
    each evaluated record's P(correct) by id, for the estimates that join labels to it."""

    app: str = ""
    p_by_id: dict[str, float | None] = field(default_factory=dict)
    accuracy: Estimate | None = None
    label_free: LabelFree | None = None

    def count(self, c: Counted) -> None:
        super().count(c)
        if c.outcome == "evaluated":
            self.p_by_id[c.id] = c.p_correct

    def quantile(self, q: float) -> float | None:
        return quantile(self.scores, q) if self.scores else None


def counted(rec: Record) -> Counted:
    """What the figures count of a result read as a plain object: a field of another type than
    the result's reads as absent."""
    components = rec.get("components")
    kind = None
    if isinstance(components, dict):
        verdict, status = components.get("verdict"), components.get("filter_status")
        kind = verdict_class(
            verdict if isinstance(verdict, str) else None,
            status if isinstance(status, str) else None,
        )
    raw = rec.get("usage")
    usage: dict[str, Any] = raw if isinstance(raw, dict) else {}
    cost = usage.get("cost_usd")
    tier = rec.get("tier")
    return Counted(
        id=str(rec.get("id")),
        outcome=str(rec.get("outcome")),
        score=R.score(rec),
        tier=tier if isinstance(tier, str) else None,
        p_correct=R.p_correct(rec),
        verdict_class=kind,
        issues=tuple(R.issues(rec)),
        error=rec.get("error") if isinstance(rec.get("error"), str) else None,
        needs_review=rec.get("needs_review") is True,
        unsafe=R.unsafe(rec),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cost_usd=float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool)
        else None,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
    total = AppFigures(app=ALL)
    groups: dict[str, AppFigures] = {}  # an app named "(all)" is a row of its own
    for rec in records:
        name = key(rec)
        c = counted(rec)
        for g in (total, groups.setdefault(name, AppFigures(app=name))):
            g.count(c)
    rows = [total, *(groups[k] for k in sorted(groups))]
    for g in rows:
        g.accuracy = with_labels(g.p_by_id, labels)
        known = [p for p in g.p_by_id.values() if p is not None]
        if calibration is not None and known:
            squares = sum(p * p for p in known)
            g.label_free = calibration.label_free(len(known), sum(known), squares)
    return rows


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
