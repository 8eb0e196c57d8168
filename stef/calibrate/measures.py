"""How good the judge's probability is against the labels: AUC (ranking) with a bootstrap CI,
Brier score, expected calibration error over 10 equal-width bins with its reliability table, the
resolution E[p | correct] - E[p | wrong], and the smallest accuracy drop a window can detect.

ECE alone rewards a constant (the base rate has ECE ≈ 0 and AUC 0.5): read it beside AUC, never
instead. Records the judge could not score have no probability: they are left out of these
figures (they count as wrong predictions in κ, and as ``judge_errors``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stef.accuracy import auc_sorted, detectable_drop
from stef.stats import quantile

BINS = 10


@dataclass(frozen=True)
class Scored:
    """One labelled record's probability (``p``) of being correct, and its label."""

    p: float
    label: bool
    weight: float = 1.0


def auc(points: Sequence[Scored]) -> float | None:
    """Area under the ROC curve of ``points`` (:func:`stef.accuracy.auc`)."""
    return _auc_sorted(sorted(points, key=lambda s: s.p))


def _auc_sorted(points: Sequence[Scored]) -> float | None:
    return auc_sorted([(s.p, s.label, s.weight) for s in points])


def auc_ci(
    points: Sequence[Scored], *, resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the AUC (records resampled with replacement)."""
    ordered = sorted(points, key=lambda s: s.p)
    if _auc_sorted(ordered) is None:
        return None
    rng = random.Random(seed)
    n = len(ordered)
    values: list[float] = []
    for _ in range(resamples):
        counts = [0] * n
        for k in rng.choices(range(n), k=n):
            counts[k] += 1
        # Resampling is re-weighting: the sorted order holds, no sort per resample.
        drawn = [Scored(s.p, s.label, c) for s, c in zip(ordered, counts, strict=True) if c]
        a = _auc_sorted(drawn)
        if a is not None:
            values.append(a)
    if not values:
        return None
    alpha = (1 - level) / 2
    return quantile(values, alpha), quantile(values, 1 - alpha)


def brier(points: Sequence[Scored]) -> float | None:
    """Mean squared distance between p and the label (0 perfect, 0.25 a coin)."""
    w = sum(s.weight for s in points)
    if w <= 0:
        return None
    return sum(s.weight * (s.p - float(s.label)) ** 2 for s in points) / w


def reliability(points: Sequence[Scored], bins: int = BINS) -> list[dict[str, Any]]:
    """Per equal-width bin of p: the records, their mean p and the share actually correct."""
    rows: list[dict[str, Any]] = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [s for s in points if _bin(s.p, bins) == b]
        w = sum(s.weight for s in inside)
        rows.append(
            {
                "bin": [round(lo, 2), round(hi, 2)],
                "n": len(inside),
                "mean_p": None if w <= 0 else sum(s.weight * s.p for s in inside) / w,
                "observed": None if w <= 0 else sum(s.weight for s in inside if s.label) / w,
            }
        )
    return rows


def _bin(p: float, bins: int) -> int:
    return min(bins - 1, max(0, int(p * bins)))


def ece(points: Sequence[Scored], bins: int = BINS) -> float | None:
    """Expected calibration error: the bins' |mean p - observed|, weighted by their records."""
    total = sum(s.weight for s in points)
    if total <= 0:
        return None
    out = 0.0
    for row, b in zip(reliability(points, bins), range(bins), strict=True):
        if row["mean_p"] is None:
            continue
        w = sum(s.weight for s in points if _bin(s.p, bins) == b)
        out += w / total * abs(row["mean_p"] - row["observed"])
    return out


def resolution(points: Sequence[Scored]) -> tuple[float, float] | None:
    """(E[p | correct], E[p | wrong]); None without both classes."""
    pos = [s.p for s in points if s.label]
    neg = [s.p for s in points if not s.label]
    if not pos or not neg:
        return None
    return sum(pos) / len(pos), sum(neg) / len(neg)


def sd(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def drop_figures(
    points: Sequence[Scored], window: int, *, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """The resolution with its bootstrap CI, and the smallest accuracy drop a window of
    ``window`` records can detect (with the CI that the resolution's CI gives it)."""
    res = resolution(points)
    if res is None:
        return {
            "resolution": None,
            "resolution_ci": None,
            "window": window,
            "min_drop": None,
            "min_drop_ci": None,
        }
    value = res[0] - res[1]
    rng = random.Random(seed)
    draws: list[float] = []
    pts = list(points)
    for _ in range(resamples):
        r = resolution(rng.choices(pts, k=len(pts)))
        if r is not None:
            draws.append(r[0] - r[1])
    lo, hi = quantile(draws, 0.025), quantile(draws, 0.975)
    spread = sd([s.p for s in pts])

    def drop(r: float) -> float | None:
        d = detectable_drop(spread, r, window)
        return None if d is None else round(d, 4)

    return {
        "resolution": round(value, 4),
        "resolution_ci": [round(lo, 4), round(hi, 4)],
        "window": window,
        "min_drop": drop(value),
        # A smaller resolution means a larger drop is needed: the CI's ends swap.
        "min_drop_ci": [drop(hi), drop(lo)],
    }


def probability_metrics(
    points: Sequence[Scored], *, resamples: int = 2000, seed: int = 0, with_ci: bool = True
) -> dict[str, Any]:
    """AUC (and its CI when ``with_ci``), Brier and ECE of ``points``."""
    ci = auc_ci(points, resamples=resamples, seed=seed) if with_ci else None
    return {
        "auc": _round(auc(points)),
        "auc_ci": None if ci is None else [_round(ci[0]), _round(ci[1])],
        "brier": _round(brier(points)),
        "ece": _round(ece(points)),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
