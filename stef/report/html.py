"""The report page: one HTML file, inline CSS and SVG, no script; a Content-Security-Policy
that allows nothing to load. The page is ``templates/report.html``, rendered by Jinja2 with
autoescape on: this module gives it text and numbers, never markup, except the SVG figures
(:mod:`stef.calibrate.plot` escapes their text itself)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from stef.calibrate.plot import BLUE, histogram_svg, reliability_svg
from stef.calibration import Calibration
from stef.report.figures import AppFigures, per_app, reliability, worst
from stef.results_file import Record
from stef.review import explain as E
from stef.review import records as R
from stef.summary import TIERS

# The verdict mix in the order the per-release table shows it (stef.summary.MIX's classes).
SHOWN = ("error", "undecided", "looks_right")

APP_HEAD = (
    "app", "records", "evaluated", *TIERS, "P10", "P50", "estimated accuracy (95% CI)",
    "unsafe", "judge errors", "needs review", "cost (USD)", "tokens in / out",
)  # fmt: skip
RELEASE_HEAD = (
    "app and release", "evaluated", "error found", "undecided", "looks right",
    "needs review", "poor tier", "top issues", "estimated accuracy (95% CI)",
)  # fmt: skip
WORST_HEAD = ("id", "app", "score", "p(correct)", "issues", "question and SQL", "rationale")


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, right-aligned when ``numeric``, and a muted line under it."""

    text: str
    numeric: bool = False
    note: str | None = None


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("stef.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env.get_template("report.html")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _accuracy(g: AppFigures, total: AppFigures | None = None) -> Cell:
    """PPI++ with sampled labels; else the label-free estimate or its reason (said once, on the
    ``total`` row, when a row's is the same); else the labels."""
    e = g.accuracy
    if e is not None and e.ppi is not None:
        ci = e.ppi.interval
        how = "labels only" if e.ppi.weight == 0 else f"judge (weight {e.ppi.weight:.2f})"
        return Cell(_interval(ci.estimate, ci.low, ci.high), note=f"{how} + {e.n_labelled} labels")
    free = g.label_free
    if free is not None and free.interval is not None:
        ci = free.interval
        return Cell(_interval(ci.estimate, ci.low, ci.high), note="judge only, no sampled labels")
    if e is not None and e.labels_only is not None:
        lo = e.labels_only
        return Cell(_interval(lo.estimate, lo.low, lo.high), note=f"{e.n_labelled} labels only")
    if free is not None and free.reason is not None:
        same = total is not None and total.label_free is not None
        if same and total is not g and total.label_free.reason == free.reason:  # type: ignore[union-attr]
            return Cell("no estimate", note="as the first row says")
        return Cell("no estimate", note=free.reason)
    return Cell("–", note="needs a calibrated judge (judge.p_correct) or labels")


def _interval(estimate: float, low: float, high: float) -> str:
    return f"{_pct(estimate)} [{_pct(low)}, {_pct(high)}]"


def _errors(g: AppFigures) -> Cell:
    if not g.judge_errors:
        return Cell("0")
    reasons = g.judge_error_reasons.most_common()
    return Cell(str(g.judge_errors), note=", ".join(f"{k} {v}" for k, v in reasons))


def _app_rows(rows: Sequence[AppFigures]) -> list[list[Cell]]:
    out = []
    for g in rows:
        out.append(
            [
                Cell(g.app),
                Cell(str(g.received), True),
                Cell(str(g.evaluated), True),
                *(Cell(str(g.tiers.get(t, 0)), True) for t in TIERS),
                Cell(_num(g.quantile(0.1)), True),
                Cell(_num(g.quantile(0.5)), True),
                _accuracy(g, rows[0]),
                Cell(str(g.unsafe), True),
                _errors(g),
                Cell(str(g.needs_review), True),
                Cell(f"{g.cost_usd:.4f}" if g.priced else "–", True),
                Cell(f"{g.prompt_tokens:,} / {g.completion_tokens:,}", True),
            ]
        )
    return out


def _share(n: int, of: int) -> str:
    return "–" if not of else f"{100 * n / of:.0f}%"


def _release_rows(rows: Sequence[AppFigures]) -> list[list[Cell]]:
    """What the judge could tell, per app and release: errors found, undecided, looks right,
    needs review beside the poor tier; the commonest issues; the accuracy estimate."""
    out = []
    for g in rows:
        n = g.evaluated
        issues = ", ".join(f"{k} {_share(v, n)}" for k, v in g.issues.most_common(3))
        out.append(
            [
                Cell(g.app),
                Cell(str(n), True),
                *(Cell(_share(g.mix[k], n), True) for k in SHOWN),
                Cell(_share(g.needs_review, n), True),
                Cell(_share(g.tiers.get("poor", 0), n), True),
                Cell(issues or "–"),
                _accuracy(g, rows[0]),
            ]
        )
    return out


def _backends(records: Sequence[Record]) -> str:
    judges = {str(r["judge"].get("backend")) for r in records if isinstance(r.get("judge"), dict)}
    return ", ".join(sorted(judges)) or "–"


def _worst_row(r: Record) -> dict[str, Any]:
    given = r.get("input") if isinstance(r.get("input"), dict) else None
    text = "not in the results (give the input log with --input)"
    if isinstance(given, dict):
        text = f"{given.get('question') or ''}\n\n{given.get('sql') or ''}"
    return {
        "id": str(r.get("id")),
        "app": str(r.get("app") or "–"),
        "score": _num(R.score(r)),
        "p_correct": _num(R.p_correct(r), 2),
        "issues": R.issues(r),
        "text": text,
        # The reference's verdict and what decided it; the counterexample when rows differed.
        "reference": {"said": E.reference(r), "example": E.counterexample(r)},
        "rationale": str(r.get("rationale") or ""),
    }


def render(
    records: Sequence[Record],
    *,
    source: str,
    labels: Mapping[str, bool] | None = None,
    sample: Mapping[str, bool] | None = None,
    worst_n: int = 20,
    now: datetime | None = None,
    calibration: Calibration | None = None,
) -> str:
    """The report of ``records`` as one HTML document: ``labels`` (every label) draw the
    reliability diagram; ``sample`` (the labels of a random order; default: ``labels``) correct
    the accuracy estimate, which labels picked by doubt would bias; ``calibration`` (the one
    the results were judged with) gives the estimate without labels."""
    labels = labels or {}
    rows = per_app(records, labels if sample is None else sample, calibration)
    releases = per_app(records, labels if sample is None else sample, calibration, by_release=True)
    total = rows[0]
    scores = total.scores
    figure: Markup | None = None
    if labels:
        basis, points = reliability(records, labels)
        x_label = "judge's P(correct)" if basis == "p_correct" else "score / 100"
        title = (
            "Reliability: labelled share correct vs P(correct)"
            if basis == "p_correct"
            else "Labelled share correct by score (no P(correct) in the results)"
        )
        figure = Markup(reliability_svg(points, title=title, x_label=x_label))
    histogram = histogram_svg(
        [(f"evaluated records n={len(scores)}", BLUE, scores)],
        title="Scores of evaluated records (share per 5-point bin)",
    )
    return _template().render(
        source=source,
        records=total.received,
        labels=len(labels),
        written=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        backends=_backends(records),
        none_good=bool(total.evaluated)
        and not total.tiers.get("excellent", 0) + total.tiers.get("good", 0),
        release_head=RELEASE_HEAD,
        releases=_release_rows(releases),
        app_head=APP_HEAD,
        apps=_app_rows(rows),
        histogram=Markup(histogram),
        reliability=figure,
        worst_n=worst_n,
        worst_head=WORST_HEAD,
        worst=[_worst_row(r) for r in worst(records, worst_n)],
    )
