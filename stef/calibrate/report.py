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
    }


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
    items: Sequence[Item], threshold: float, *, resamples: int = MIN_RESAMPLES, seed: int = 0
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
    return out


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
) -> str:
    """The readable report: the overall row, the threshold search, one table per dimension."""
    sql = "re-formatted by sqlglot" if reformatted else "as logged"
    out = [
        f"judge: {backend}   pass threshold: score >= {threshold:g}   "
        f"positive class: {POSITIVE} (label true)   sql: {sql}",
        f"kappa CI: percentile bootstrap, {resamples} resamples; judge errors count as wrong "
        "predictions (on a correct item a false negative, on a wrong item a false positive)",
        "",
        render_table(_HEADER, [_row("all", rep)]),
        "",
    ]
    if best is not None:
        out.append(
            f"kappa-maximising threshold: score >= {best.value:g} "
            f"(kappa {_fmt(best.kappa, False)}, "
            f"balanced accuracy {_fmt(best.balanced_accuracy)}) "
            f"-- beside the default {threshold:g} (kappa {_fmt(rep['kappa'], False)}), not instead"
        )
    for dim in DIMENSIONS:
        groups = rep["breakdown"][dim]
        if not groups:
            continue
        out += ["", f"by {dim.replace('_', ' ')}"]
        out.append(render_table(_HEADER, [_row(v, m) for v, m in groups.items()]))
    return "\n".join(out)
