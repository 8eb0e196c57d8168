"""The report page: one HTML file, inline CSS and SVG, no script; a Content-Security-Policy
that allows nothing to load. Every value from a record goes through :func:`html.escape`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape

from stef.calibrate.plot import BLUE, histogram_svg, reliability_svg
from stef.calibration import Calibration
from stef.report.counterexample import reference_html
from stef.report.figures import TIERS, AppFigures, per_app, reliability, worst
from stef.review import records as R

# The verdict mix in the order the per-release table shows it (stef.summary.MIX's classes).
SHOWN = ("error", "undecided", "looks_right")

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 2em auto; max-width: 1200px;
  padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 2em; }
.meta { color: #57606a; }
table { border-collapse: collapse; width: 100%; margin: .5em 0; }
th, td { border-bottom: 1px solid #d0d7de; padding: .3em .5em; text-align: left;
  vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.total td { font-weight: 600; }
.muted { color: #57606a; font-size: .9em; }
.issue { display: inline-block; background: #ffebe9; color: #82071e; border-radius: 1em;
  padding: 0 .5em; margin: 0 .2em .2em 0; }
pre { white-space: pre-wrap; margin: 0; font-size: .9em; }
svg { max-width: 100%; height: auto; }
table.grid { width: auto; display: inline-table; margin: .3em 1em .3em 0; font-size: .85em; }
table.grid caption { text-align: left; font-weight: 600; }
table.grid th, table.grid td { border: 1px solid #d0d7de; padding: .1em .4em; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _accuracy(g: AppFigures, total: AppFigures | None = None) -> str:
    """PPI++ with sampled labels; else the label-free estimate or its reason (said once, on the
    ``total`` row, when a row's is the same); else the labels."""
    e = g.accuracy
    if e is not None and e.ppi is not None:
        ci = e.ppi.interval
        how = "labels only" if e.ppi.weight == 0 else f"judge (weight {e.ppi.weight:.2f})"
        return (
            f"{_pct(ci.estimate)} [{_pct(ci.low)}, {_pct(ci.high)}]"
            f'<br><span class="muted">{how} + {e.n_labelled} labels</span>'
        )
    free = g.label_free
    if free is not None and free.interval is not None:
        ci = free.interval
        return (
            f"{_pct(ci.estimate)} [{_pct(ci.low)}, {_pct(ci.high)}]"
            '<br><span class="muted">judge only, no sampled labels</span>'
        )
    if e is not None and e.labels_only is not None:
        lo = e.labels_only
        return (
            f"{_pct(lo.estimate)} [{_pct(lo.low)}, {_pct(lo.high)}]"
            f'<br><span class="muted">{e.n_labelled} labels only</span>'
        )
    if free is not None and free.reason is not None:
        same = total is not None and total.label_free is not None
        if same and total is not g and total.label_free.reason == free.reason:  # type: ignore[union-attr]
            return 'no estimate<br><span class="muted">as the first row says</span>'
        return f'no estimate<br><span class="muted">{escape(free.reason)}</span>'
    return '–<br><span class="muted">needs a calibrated judge (judge.p_correct) or labels</span>'


def _errors(g: AppFigures) -> str:
    total = sum(g.judge_errors.values())
    if not total:
        return "0"
    reasons = ", ".join(f"{escape(k)} {v}" for k, v in g.judge_errors.most_common())
    return f'{total}<br><span class="muted">{reasons}</span>'


def _app_table(rows: Sequence[AppFigures]) -> str:
    head = [
        "app", "records", "evaluated", *TIERS, "P10", "P50", "estimated accuracy (95% CI)",
        "unsafe", "judge errors", "needs review", "cost (USD)", "tokens in / out",
    ]  # fmt: skip
    out = ["<table><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr>"]
    for g in rows:
        cost = f"{g.cost_usd:.4f}" if g.priced else "–"
        cells = [
            f"<td>{escape(g.app)}</td>",
            f'<td class="n">{g.records}</td>',
            f'<td class="n">{g.evaluated}</td>',
            *(f'<td class="n">{g.tiers.get(t, 0)}</td>' for t in TIERS),
            f'<td class="n">{_num(g.quantile(0.1))}</td>',
            f'<td class="n">{_num(g.quantile(0.5))}</td>',
            f"<td>{_accuracy(g, rows[0])}</td>",
            f'<td class="n">{g.unsafe}</td>',
            f"<td>{_errors(g)}</td>",
            f'<td class="n">{g.needs_review}</td>',
            f'<td class="n">{cost}</td>',
            f'<td class="n">{g.prompt_tokens:,} / {g.completion_tokens:,}</td>',
        ]
        cls = ' class="total"' if g is rows[0] else ""
        out.append(f"<tr{cls}>{''.join(cells)}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _share(n: int, of: int) -> str:
    return "–" if not of else f"{100 * n / of:.0f}%"


def _release_table(rows: Sequence[AppFigures]) -> str:
    """What the judge could tell, per app and release: errors found, undecided, looks right,
    needs review beside the poor tier; the commonest issues; the accuracy estimate."""
    head = [
        "app and release", "evaluated", "error found", "undecided", "looks right",
        "needs review", "poor tier", "top issues", "estimated accuracy (95% CI)",
    ]  # fmt: skip
    out = ["<table><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr>"]
    for g in rows:
        n = g.evaluated
        issues = ", ".join(f"{escape(k)} {_share(v, n)}" for k, v in g.issues.most_common(3))
        cells = [
            f"<td>{escape(g.app)}</td>",
            f'<td class="n">{n}</td>',
            *(f'<td class="n">{_share(g.verdicts[k], n)}</td>' for k in SHOWN),
            f'<td class="n">{_share(g.needs_review, n)}</td>',
            f'<td class="n">{_share(g.tiers.get("poor", 0), n)}</td>',
            f"<td>{issues or '–'}</td>",
            f"<td>{_accuracy(g, rows[0])}</td>",
        ]
        cls = ' class="total"' if g is rows[0] else ""
        out.append(f"<tr{cls}>{''.join(cells)}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _judge_line(records: Sequence[R.Record], rows: Sequence[AppFigures]) -> str:
    """Which judge, and what its tiers can mean."""
    backends = sorted(
        {str(r["judge"].get("backend")) for r in records if isinstance(r.get("judge"), dict)}
    )
    total = rows[0]
    line = (
        f"Judge: {escape(', '.join(backends) or '–')}. <b>Error found</b>: a verdict Incorrect or "
        "a question filter not applied in the SQL; <b>undecided</b>: the judge could not tell; "
        "the tiers rank its confidence that the SQL is right."
    )
    if total.evaluated and not total.tiers.get("excellent", 0) + total.tiers.get("good", 0):
        line += (
            " No record reached good with this judge: its <i>poor</i> mostly means it could not "
            "tell, not wrong SQL."
        )
    return f'<p class="meta">{line}</p>'


def _worst_table(recs: Sequence[R.Record]) -> str:
    if not recs:
        return '<p class="muted">No evaluated record.</p>'
    head = ["id", "app", "score", "p(correct)", "issues", "question and SQL", "rationale"]
    out = ["<table><tr>", *(f"<th>{h}</th>" for h in head), "</tr>"]
    for r in recs:
        given = r.get("input") if isinstance(r.get("input"), dict) else None
        text = "not in the results (give the input log with --input)"
        if isinstance(given, dict):
            text = f"{given.get('question') or ''}\n\n{given.get('sql') or ''}"
        issues = "".join(f'<span class="issue">{escape(i)}</span>' for i in R.issues(r))
        out.append(
            "<tr>"
            f"<td>{escape(str(r.get('id')))}</td>"
            f"<td>{escape(str(r.get('app') or '–'))}</td>"
            f'<td class="n">{_num(R.score(r))}</td>'
            f'<td class="n">{_num(R.p_correct(r), 2)}</td>'
            f"<td>{issues}</td>"
            f"<td><pre>{escape(text)}</pre>{reference_html(r)}</td>"
            f"<td>{escape(str(r.get('rationale') or ''))}</td>"
            "</tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _head(source: str) -> list[str]:
    return [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>STEF report: {escape(source)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>STEF report</h1>",
    ]


def render(
    records: Sequence[R.Record],
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
    scores = rows[0].scores
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        *_head(source),
        f'<p class="meta">{escape(source)} · {rows[0].records} results · '
        f"{len(labels)} labels · written {when}</p>",
        _judge_line(records, rows),
        "<h2>Per release: what the judge could tell</h2>",
        _release_table(releases),
        "<h2>Per app</h2>",
        _app_table(rows),
        '<p class="muted">P10/P50: score quantiles of evaluated records. Estimated accuracy: '
        "the judge's P(correct) corrected by the labels of a random order (PPI++, as stef "
        "estimate), else the label-free estimate (as stef summary), whose interval counts how "
        "the calibration transfers between sources, or why there is none. Cost is the sum over the "
        "records whose price is known.</p>",
        "<h2>Score distribution</h2>",
        histogram_svg(
            [(f"evaluated records n={len(scores)}", BLUE, scores)],
            title="Scores of evaluated records (share per 5-point bin)",
        ),
    ]
    if labels:
        basis, points = reliability(records, labels)
        x_label = "judge's P(correct)" if basis == "p_correct" else "score / 100"
        title = (
            "Reliability: labelled share correct vs P(correct)"
            if basis == "p_correct"
            else "Labelled share correct by score (no P(correct) in the results)"
        )
        parts += [
            "<h2>Reliability</h2>",
            reliability_svg(points, title=title, x_label=x_label),
            '<p class="muted">One dot per bin of labelled records (area: how many); a calibrated '
            "judge's dots lie on the dashed diagonal.</p>",
        ]
    parts += [
        f"<h2>The {worst_n} lowest scores</h2>",
        _worst_table(worst(records, worst_n)),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
