"""The calibration report: the agreement figures overall and broken down by source, app,
complexity tier, error type and verdict, as the ``--json`` object or as readable tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stef.calibrate.agreement import (
    MIN_RESAMPLES,
    Item,
    Threshold,
    accuracy,
    balanced_accuracy,
    confusion_at,
    kappa,
    kappa_ci,
    sensitivity,
    specificity,
)
from stef.calibrate.measures import Scored, drop_figures, probability_metrics, reliability
from stef.calibration import Calibration
from stef.text_table import render_table

POSITIVE = "correct"
DIMENSIONS = ("source", "app", "complexity", "error_type", "verdict")


def metrics(
    items: Sequence[Item], threshold: float, *, resamples: int = MIN_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """The agreement figures of ``items`` (the keys of ``--json`` but ``breakdown``)."""
    c = confusion_at(items, threshold)
    ci = kappa_ci(c, resamples=resamples, seed=seed)
    return {
        "n": c.n,
        "accuracy": _round(accuracy(c)),
        "kappa": _round(kappa(c)),
        "kappa_ci": None if ci is None else [_round(ci[0]), _round(ci[1])],
        "balanced_accuracy": _round(balanced_accuracy(c)),
        "sensitivity": _round(sensitivity(c)),
        "specificity": _round(specificity(c)),
        "confusion": c.as_dict(),
        "judge_errors": sum(1 for i in items if i.score is None),
        **probability_metrics(points(items), with_ci=False),
    }


def points(items: Sequence[Item]) -> list[Scored]:
    """The items' probability of being correct: p_correct when a calibration gave one, else
    the raw signal; judge errors have none."""
    out: list[Scored] = []
    for i in items:
        p = i.p_correct if i.p_correct is not None else i.raw
        if p is not None and i.score is not None:
            out.append(Scored(p, i.label))
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _groups(items: Sequence[Item], dimension: str) -> dict[str, list[Item]]:
    groups: dict[str, list[Item]] = {}
    for item in items:
        if dimension == "error_type":
            keys: Sequence[str] = item.error_types  # an item counts under each of its types
        else:
            value = getattr(item, dimension)
            keys = (
                ["judge_error" if dimension == "verdict" else "unknown"]
                if value is None
                else [value]
            )
        for key in keys:
            groups.setdefault(key, []).append(item)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def report(
    items: Sequence[Item],
    threshold: float,
    *,
    resamples: int = MIN_RESAMPLES,
    seed: int = 0,
    window: int = 1000,
) -> dict[str, Any]:
    """The ``--json`` object: the overall figures plus ``breakdown`` by dimension and value."""
    out = metrics(items, threshold, resamples=resamples, seed=seed)
    out["breakdown"] = {
        dim: {
            value: metrics(group, threshold, resamples=resamples, seed=seed)
            for value, group in _groups(items, dim).items()
        }
        for dim in DIMENSIONS
    }
    pts = points(items)
    out.update(probability_metrics(pts, resamples=resamples, seed=seed))
    out["reliability"] = [
        {**row, "mean_p": _round(row["mean_p"]), "observed": _round(row["observed"])}
        for row in reliability(pts)
    ]
    # Per source when the labels name sources, else per app: the mean over them counts each
    # once, so the largest does not stand for all.
    dim = "source" if any(i.source for i in items) else "app"
    per = {}
    for value, group in _groups(items, dim).items():
        m = metrics(group, threshold, resamples=resamples, seed=seed)
        m.update(probability_metrics(points(group), resamples=resamples, seed=seed))
        per[value] = m
    out["per_source"] = per
    out["per_source_dimension"] = dim
    out["mean_over_sources"] = {
        key: _mean([m[key] for m in per.values()])
        for key in ("auc", "brier", "ece", "kappa", "balanced_accuracy")
    }
    out.update(drop_figures(pts, window, resamples=resamples, seed=seed))
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def header(
    *,
    threshold: float,
    best: Threshold | None,
    backend: str,
    resamples: int,
    seed: int,
    reformatted: bool,
) -> dict[str, Any]:
    """What the readable report's header and threshold line say, as ``--json`` keys: the judge
    backend, the pass threshold, the κ-maximising threshold (null when none was found), the
    positive class, how the SQL was read and the bootstrap's resamples and seed."""
    return {
        "backend": backend,
        "pass_threshold": threshold,
        "best_threshold": None
        if best is None
        else {
            "value": best.value,
            "kappa": _round(best.kappa),
            "balanced_accuracy": _round(best.balanced_accuracy),
        },
        "positive_class": POSITIVE,
        "sql": "reformatted" if reformatted else "as_logged",
        "resamples": resamples,
        "seed": seed,
    }


def render_probability(rep: dict[str, Any], probability: str) -> list[str]:
    """AUC, Brier, ECE, resolution and the detectable drop; per source; the reliability table."""
    ci = rep["auc_ci"]
    ci_text = "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"
    out = [
        f"probability of correct: {probability}",
        f"AUC {_fmt(rep['auc'], False)}{ci_text}   Brier {_fmt(rep['brier'], False)}   "
        f"ECE {_fmt(rep['ece'], False)} (10 equal-width bins; a constant at the base rate has "
        "ECE ~0 and AUC 0.5: read them together)",
    ]
    if rep["resolution"] is not None:
        out.append(_resolution_line(rep))
    out += ["", f"by {rep['per_source_dimension']}: probability figures"]
    out.append(_probability_table(rep))
    out += ["", "reliability (p binned; observed: share actually correct)"]
    out.append(
        render_table(
            ["p", "n", "mean p", "observed"],
            [
                [
                    f"{row['bin'][0]:.1f}-{row['bin'][1]:.1f}",
                    str(row["n"]),
                    _fmt(row["mean_p"], False),
                    _fmt(row["observed"], False),
                ]
                for row in rep["reliability"]
            ],
        )
    )
    return out


def _resolution_line(rep: dict[str, Any]) -> str:
    """The resolution with its CI and the smallest accuracy drop a window can detect."""
    r_ci, d_ci = rep["resolution_ci"], rep["min_drop_ci"]
    drop = rep["min_drop"]
    return (
        f"resolution E[p|correct] - E[p|wrong]: {rep['resolution']:.3f} "
        f"[{r_ci[0]:.3f}, {r_ci[1]:.3f}]; smallest accuracy drop a window of "
        f"{rep['window']:,} records can detect: "
        + ("none (no resolution)" if drop is None else f"{drop:.3f}")
        + ("" if d_ci[0] is None or d_ci[1] is None else f" [{d_ci[0]:.3f}, {d_ci[1]:.3f}]")
        + ("" if d_ci[1] is not None else " [-, no resolution at the CI's low end]")
    )


def _probability_table(rep: dict[str, Any]) -> str:
    """The probability figures per source (or app), then their mean over the sources."""
    head = ["", "n", "AUC", "AUC 95% CI", "Brier", "ECE", "kappa", "bal.acc", "errors"]
    rows = [
        [
            name,
            str(m["n"]),
            _fmt(m["auc"], False),
            "-" if m["auc_ci"] is None else f"[{m['auc_ci'][0]:.3f}, {m['auc_ci'][1]:.3f}]",
            _fmt(m["brier"], False),
            _fmt(m["ece"], False),
            _fmt(m["kappa"], False),
            _fmt(m["balanced_accuracy"]),
            str(m["judge_errors"]),
        ]
        for name, m in rep["per_source"].items()
    ]
    mean = rep["mean_over_sources"]
    rows.append(
        [
            "mean over " + ("sources" if rep["per_source_dimension"] == "source" else "apps"),
            str(len(rep["per_source"])),
            _fmt(mean["auc"], False),
            "",
            _fmt(mean["brier"], False),
            _fmt(mean["ece"], False),
            _fmt(mean["kappa"], False),
            _fmt(mean["balanced_accuracy"]),
            "",
        ]
    )
    return render_table(head, rows)


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def _row(name: str, m: dict[str, Any]) -> list[str]:
    c = m["confusion"]
    ci = m["kappa_ci"]
    return [
        name,
        str(m["n"]),
        _fmt(m["accuracy"]),
        _fmt(m["kappa"], pct=False),
        "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
        _fmt(m["balanced_accuracy"]),
        _fmt(m["sensitivity"]),
        _fmt(m["specificity"]),
        str(c["tp"]),
        str(c["fp"]),
        str(c["tn"]),
        str(c["fn"]),
        str(m["judge_errors"]),
    ]


_HEADER = ["", "n", "accuracy", "kappa", "kappa 95% CI", "bal.acc", "sens", "spec"]
_HEADER += ["tp", "fp", "tn", "fn", "errors"]


def render(
    rep: dict[str, Any],
    *,
    threshold: float,
    best: Threshold | None,
    backend: str,
    resamples: int,
    reformatted: bool,
    probability: str = "raw signal",
    pass_rule: str | None = None,
) -> str:
    """The readable report: the overall row, the threshold search, the probability figures, one
    table per dimension."""
    sql = "re-formatted by sqlglot" if reformatted else "as logged"
    out = [
        f"judge: {backend}   pass threshold: {pass_rule or f'score >= {threshold:g}'}   "
        f"positive class: {POSITIVE} (label true)   sql: {sql}",
        f"kappa CI: percentile bootstrap, {resamples} resamples; judge errors count as wrong "
        "predictions (on a correct item a false negative, on a wrong item a false positive)",
        "",
        render_table(_HEADER, [_row("all", rep)]),
        "",
    ]
    if best is not None:
        # With a calibration the tables read p_correct x 100: say it on p's own scale.
        on_p = pass_rule is not None and pass_rule.startswith("p_correct")
        what, value, default = (
            ("p_correct", f"{best.value / 100:.4g}", f"{threshold / 100:.4g}")
            if on_p
            else ("score", f"{best.value:g}", f"{threshold:g}")
        )
        out.append(
            f"kappa-maximising threshold: {what} >= {value} "
            f"(kappa {_fmt(best.kappa, False)}, "
            f"balanced accuracy {_fmt(best.balanced_accuracy)}) "
            f"-- beside the {'calibration' if on_p else 'default'} {default} "
            f"(kappa {_fmt(rep['kappa'], False)}), not instead"
        )
    out += ["", *render_probability(rep, probability)]
    for dim in DIMENSIONS:
        groups = rep["breakdown"][dim]
        if not groups:
            continue
        out += ["", f"by {dim.replace('_', ' ')}"]
        out.append(render_table(_HEADER, [_row(v, m) for v, m in groups.items()]))
    return "\n".join(out)


def render_fit(cal: Calibration, path: str, *, judge_errors: int = 0) -> str:
    """What ``--fit`` wrote, and how the map did on sources it was not fitted on."""
    m = cal.metrics
    cross = m["cross_source"]
    out = [
        f"calibration written to {path}: {cal.describe()}",
        f"map: {cal.map.kind}, chosen by leave-one-source-out Brier (mean over held-out "
        f"sources): "
        + ", ".join(
            f"{kind} {v['brier']:.4f}" if v["brier"] is not None else f"{kind} -"
            for kind, v in m["candidates"].items()
        ),
        f"pass threshold on p_correct (kappa-maximising on the {cal.labels:,} labels): "
        f"{cal.threshold:.4f}"
        + (f"; {judge_errors} judge errors left out (no raw signal)" if judge_errors else ""),
        f"resolution on the labels: E[p|correct] {cal.mean_p_correct:.3f} - "
        f"E[p|wrong] {cal.mean_p_wrong:.3f} = {cal.resolution:.3f}; on sources the map "
        f"never saw: {_fmt(cross.get('resolution'), False)}",
        "",
        "cross-source (each source predicted by a map fitted on the others):",
        _cross_source_table(cross, cal.labels),
        "",
        *_weighting_lines(m),
    ]
    return "\n".join(out)


def _cross_source_table(cross: dict[str, Any], labels: int) -> str:
    """The held-out figures per source, pooled, and their mean over the sources."""
    head = ["", "n", "AUC", "Brier", "ECE", "kappa", "kappa raw"]
    rows = [_fit_row(name, v["n"], v) for name, v in cross["per_source"].items()]
    rows.append(_fit_row("pooled", labels, cross))
    rows.append(_fit_row("mean over sources", len(cross["per_source"]), cross["mean_over_sources"]))
    return render_table(head, rows)


def _fit_row(name: str, n: int, v: dict[str, Any]) -> list[str]:
    return [
        name,
        str(n),
        _fmt(v["auc"], False),
        _fmt(v["brier"], False),
        _fmt(v["ece"], False),
        _fmt(v["kappa"], False),
        _fmt(v["kappa_raw"], False),
    ]


def _weighting_lines(m: dict[str, Any]) -> list[str]:
    """What source weights did (the shares, the fit without them) and the in-sample figures."""
    w = m["weighting"]
    unweighted = w["cross_source_unweighted"]
    return [
        f"source weights: {w['scheme']}; share of records -> share of weight: "
        + ", ".join(
            f"{k} {100 * v['records']:.0f}% -> {100 * v['weight']:.0f}%"
            for k, v in w["weight_share"].items()
        ),
        "without weights (cross-source): "
        f"pooled ECE {_fmt(unweighted['ece'], False)}, "
        f"mean-over-sources ECE {_fmt(unweighted['mean_over_sources']['ece'], False)}, "
        f"Brier {_fmt(unweighted['mean_over_sources']['brier'], False)}",
        f"in-sample (fitted and measured on all labels): AUC {_fmt(m['auc'], False)}, "
        f"Brier {_fmt(m['brier'], False)}, ECE {_fmt(m['ece'], False)}, "
        f"kappa {_fmt(m['kappa'], False)} (raw {_fmt(m['kappa_raw'], False)})",
    ]
