"""``stef calibrate --fit``: a monotone map from the judge's raw signal to P(correct).

Two candidates, Platt scaling (a logistic curve in the raw signal) and isotonic regression
(pool-adjacent-violators), both weighted. The one kept is the one that transfers better from one
source to another: for each source, fit on the *other* sources and measure on it (leave one
source out); the mean Brier score over the held-out sources decides, never a fit scored on the
data it was fitted on.

Sources are weighted: each record weighs ``1 / sqrt(records of its source)``, so a source's total
weight grows as the square root of its size. On the dev set NL2SQL-Bugs holds 86% of the records
and would otherwise decide the map alone; with this it holds about 58% of the weight, and the
8-record source does not get a fifth of it either (as equal weights per source would give).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stef.accuracy import mean, variance
from stef.calibrate.agreement import Confusion, Item, confusion, kappa
from stef.calibrate.measures import Scored, auc, brier, ece, probability_metrics, resolution
from stef.calibration import (
    P_FLOOR,
    Calibration,
    Judged,
    MonotoneMap,
    SourceMeans,
    TransferSpread,
    published,
)

KINDS = ("platt", "isotonic")


@dataclass(frozen=True)
class Point:
    """One labelled record: the judge's raw signal, its label, source, and the score's pass
    decision without calibration (for κ raw)."""

    raw: float
    label: bool
    source: str
    raw_pass: bool


def points_of(items: Sequence[Item], pass_threshold: float) -> list[Point]:
    """The points a calibration is fitted on: the items the judge gave a raw signal, each with
    its uncalibrated decision, whatever calibration was loaded (the raw signal at
    ``pass_threshold / 100``; for the heuristic, its raw score at the threshold)."""
    return [
        Point(
            raw=i.raw,
            label=i.label,
            source=i.source or i.app or "unknown",
            raw_pass=i.raw >= pass_threshold / 100,
        )
        for i in items
        if i.raw is not None
    ]


def source_weights(points: Sequence[Point], scheme: str = "sqrt") -> list[float]:
    """Per record ``1 / sqrt(n_source)`` (``sqrt``) or 1 (``none``), scaled to sum to n."""
    if scheme == "none":
        return [1.0] * len(points)
    sizes: dict[str, int] = {}
    for p in points:
        sizes[p.source] = sizes.get(p.source, 0) + 1
    raw = [1 / math.sqrt(sizes[p.source]) for p in points]
    scale = len(points) / sum(raw)
    return [w * scale for w in raw]


def fit_platt(xs: Sequence[float], ys: Sequence[bool], ws: Sequence[float]) -> MonotoneMap:
    """Weighted logistic regression of the label on the raw signal (Newton's method), with
    Platt's smoothed targets so a separable set does not run to an infinite slope; a negative
    slope (a signal that ranks backwards) is refused: the map falls back to the base rate."""
    pos = sum(w for y, w in zip(ys, ws, strict=True) if y)
    neg = sum(w for y, w in zip(ys, ws, strict=True) if not y)
    t_pos, t_neg = (pos + 1) / (pos + 2), 1 / (neg + 2)
    targets = [t_pos if y else t_neg for y in ys]
    a, b = 0.0, math.log((pos + 1) / (neg + 1))
    for _ in range(100):
        g_a = g_b = h_aa = h_ab = h_bb = 0.0
        for x, t, w in zip(xs, targets, ws, strict=True):
            p = _sigmoid(a * x + b)
            d = w * (p - t)
            v = w * p * (1 - p)
            g_a += d * x
            g_b += d
            h_aa += v * x * x
            h_ab += v * x
            h_bb += v
        det = h_aa * h_bb - h_ab * h_ab
        if det <= 1e-12:
            break
        step_a = (h_bb * g_a - h_ab * g_b) / det
        step_b = (h_aa * g_b - h_ab * g_a) / det
        a, b = a - step_a, b - step_b
        if abs(step_a) < 1e-9 and abs(step_b) < 1e-9:
            break
    if a < 0:
        a, b = 0.0, math.log((pos + 1) / (neg + 1))
    return MonotoneMap(kind="platt", a=round(a, 6), b=round(b, 6))


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def fit_isotonic(xs: Sequence[float], ys: Sequence[bool], ws: Sequence[float]) -> MonotoneMap:
    """Weighted pool-adjacent-violators over the distinct raw values; each block's value is
    shrunk toward the overall rate by one pseudo-record (a pure block is not "certain")."""
    total_w = sum(ws)
    base = sum(w for y, w in zip(ys, ws, strict=True) if y) / total_w if total_w else 0.5
    groups: dict[float, list[float]] = {}
    for x, y, w in zip(xs, ys, ws, strict=True):
        g = groups.setdefault(x, [0.0, 0.0])
        g[0] += w * float(y)
        g[1] += w
    # Blocks: [x_first, x_last, weighted positives, weight].
    blocks: list[list[float]] = []
    for x in sorted(groups):
        blocks.append([x, x, groups[x][0], groups[x][1]])
        while len(blocks) > 1 and _rate(blocks[-2]) >= _rate(blocks[-1]):
            merged = blocks.pop()
            prev = blocks[-1]
            prev[1], prev[2], prev[3] = merged[1], prev[2] + merged[2], prev[3] + merged[3]
    out_x: list[float] = []
    out_y: list[float] = []
    floor = 0.0
    for first, last, positives, weight in blocks:
        # Shrinking a small block more than a large one can undo the order: keep it monotone.
        value = max(floor, (positives + base) / (weight + 1))
        floor = value
        for x in (first, last) if last != first else (first,):
            out_x.append(round(x, 6))
            out_y.append(round(value, 6))
    return MonotoneMap(kind="isotonic", x=out_x, y=out_y)


def _rate(block: list[float]) -> float:
    return block[2] / block[3] if block[3] else 0.0


FITTERS: dict[str, Callable[[Sequence[float], Sequence[bool], Sequence[float]], MonotoneMap]] = {
    "platt": fit_platt,
    "isotonic": fit_isotonic,
}


def fit_map(kind: str, points: Sequence[Point], weights: Sequence[float]) -> MonotoneMap:
    return FITTERS[kind]([p.raw for p in points], [p.label for p in points], weights)


def best_p_threshold(ps: Sequence[float], labels: Sequence[bool], default: float = 0.5) -> float:
    """The pass threshold on p that maximises κ (ties: nearest ``default``)."""
    best, best_key = default, None
    for t in sorted(set(ps)):
        k = kappa(confusion(labels, [p >= t for p in ps]))
        if k is None:
            continue
        key = (k, -abs(t - default))
        if best_key is None or key > best_key:
            best, best_key = t, key
    return best


@dataclass(frozen=True)
class CrossSource:
    """Held-out predictions of one candidate: per record p (fitted without its source) and the
    pass decision at the threshold chosen on the other sources."""

    kind: str
    p: list[float]
    passed: list[bool]


def cross_source(kind: str, points: Sequence[Point], scheme: str = "sqrt") -> CrossSource:
    """Leave one source out: every record gets the p of a map fitted on the other sources."""
    p = [0.0] * len(points)
    passed = [False] * len(points)
    for source in sorted({pt.source for pt in points}):
        train_idx = [i for i, pt in enumerate(points) if pt.source != source]
        test_idx = [i for i, pt in enumerate(points) if pt.source == source]
        train = [points[i] for i in train_idx]
        if not train or len({pt.label for pt in train}) < 2:
            for i in test_idx:
                p[i], passed[i] = 0.5, True
            continue
        fitted = fit_map(kind, train, source_weights(train, scheme))
        threshold = best_p_threshold([fitted(pt.raw) for pt in train], [pt.label for pt in train])
        for i in test_idx:
            p[i] = fitted(points[i].raw)
            passed[i] = p[i] >= threshold
    return CrossSource(kind, p, passed)


def _kappa(labels: Sequence[bool], passed: Sequence[bool]) -> float | None:
    c: Confusion = confusion(labels, list(passed))
    return kappa(c)


def figures(
    points: Sequence[Point], p: Sequence[float], passed: Sequence[bool], *, with_ci: bool = False
) -> dict[str, Any]:
    """AUC, Brier, ECE and κ of the held-out predictions: pooled, per source and the mean over
    sources (each source counted once, whatever its size)."""
    labels = [pt.label for pt in points]
    scored = [Scored(pi, pt.label) for pi, pt in zip(p, points, strict=True)]
    out: dict[str, Any] = probability_metrics(scored, with_ci=with_ci)
    out["kappa"] = _r(_kappa(labels, passed))
    out["kappa_raw"] = _r(_kappa(labels, [pt.raw_pass for pt in points]))
    per: dict[str, dict[str, Any]] = {}
    for source in sorted({pt.source for pt in points}):
        idx = [i for i, pt in enumerate(points) if pt.source == source]
        s_points = [scored[i] for i in idx]
        s_labels = [labels[i] for i in idx]
        per[source] = {
            "n": len(idx),
            "auc": _r(auc(s_points)),
            "brier": _r(brier(s_points)),
            "ece": _r(ece(s_points)),
            "kappa": _r(_kappa(s_labels, [passed[i] for i in idx])),
            "kappa_raw": _r(_kappa(s_labels, [points[i].raw_pass for i in idx])),
        }
    out["per_source"] = per
    out["mean_over_sources"] = {
        key: _mean([v[key] for v in per.values()])
        for key in ("auc", "brier", "ece", "kappa", "kappa_raw")
    }
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def fit(
    points: Sequence[Point],
    judge: Judged,
    *,
    labels_file: str | None = None,
    scheme: str = "sqrt",
) -> Calibration:
    """Choose the candidate by cross-source Brier (mean over held-out sources), fit it on every
    record, and record what it did.

    Raises:
        ValueError: fewer than two labelled records of each class.
    """
    labels = [pt.label for pt in points]
    if labels.count(True) < 2 or labels.count(False) < 2:
        raise ValueError("fitting needs at least two correct and two wrong labelled records")
    kind, candidates = _choose(points, scheme)
    weights = source_weights(points, scheme)
    fitted = fit_map(kind, points, weights)
    p_fit = [published(fitted(pt.raw)) for pt in points]
    threshold = best_p_threshold(p_fit, labels)
    # The estimate's offsets must be those of the map it corrects: in-sample means of the final
    # map (two parameters, or monotone steps: little to overfit); how far the resolution holds on
    # a source it never saw is in cross_source.resolution.
    res = resolution([Scored(pi, pt.label) for pi, pt in zip(p_fit, points, strict=True)])
    mean_pos, mean_neg = res if res is not None else (0.5, 0.5)
    return Calibration(
        transfer=transfer_spread(points, p_fit),
        judge=judge,
        map=fitted,
        threshold=round(threshold, 6),
        labels=len(points),
        labels_file=labels_file,
        mean_p_correct=round(min(1 - P_FLOOR, max(P_FLOOR, mean_pos)), 6),
        mean_p_wrong=round(min(1 - P_FLOOR, max(P_FLOOR, mean_neg)), 6),
        metrics=_fit_metrics(points, kind, candidates, p_fit, threshold, weights, scheme),
        fitted_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def _choose(points: Sequence[Point], scheme: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """The candidate of lowest held-out Brier (the mean over sources when there are several),
    and every candidate's held-out figures."""
    candidates: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        held = cross_source(kind, points, scheme)
        candidates[kind] = figures(points, held.p, held.passed)
    multi_source = len({pt.source for pt in points}) > 1

    def key(kind: str) -> float:
        m = candidates[kind]
        brier_ = m["mean_over_sources"]["brier"] if multi_source else m["brier"]
        return float("inf") if brier_ is None else float(brier_)

    return min(KINDS, key=key), candidates


def _fit_metrics(
    points: Sequence[Point],
    kind: str,
    candidates: dict[str, dict[str, Any]],
    p_fit: Sequence[float],
    threshold: float,
    weights: Sequence[float],
    scheme: str,
) -> dict[str, Any]:
    """What the fit did: in-sample figures, the chosen map's held-out figures, the candidates'
    and the same choice without source weights."""
    held = cross_source(kind, points, scheme)
    cross = figures(points, held.p, held.passed, with_ci=True)
    # The same choice without source weights, to show what weighting did.
    unweighted = cross_source(kind, points, "none")
    held_res = resolution([Scored(pi, pt.label) for pi, pt in zip(held.p, points, strict=True)])
    cross["resolution"] = None if held_res is None else round(held_res[0] - held_res[1], 4)
    in_sample = figures(points, p_fit, [p >= threshold for p in p_fit])
    return {
        "auc": in_sample["auc"],
        "brier": in_sample["brier"],
        "ece": in_sample["ece"],
        "kappa": in_sample["kappa"],
        "kappa_raw": in_sample["kappa_raw"],
        "cross_source": cross,
        "candidates": {
            k: {key_: v["mean_over_sources"][key_] for key_ in ("auc", "brier", "ece", "kappa")}
            for k, v in candidates.items()
        },
        "weighting": {
            "scheme": f"1/sqrt(n_source) per record ({scheme})",
            "weight_share": _weight_share(points, weights),
            "cross_source_unweighted": {
                key_: v
                for key_, v in figures(points, unweighted.p, unweighted.passed).items()
                if key_ != "per_source"
            },
        },
    }


def transfer_spread(points: Sequence[Point], p: Sequence[float]) -> TransferSpread:
    """Per source, E[p | correct] and E[p | wrong] under the fitted map; their mean and spread
    over the sources that have two records of each class (each source counted once)."""
    by_source: dict[str, tuple[list[float], list[float]]] = {}
    for pt, pi in zip(points, p, strict=True):
        pos, neg = by_source.setdefault(pt.source, ([], []))
        (pos if pt.label else neg).append(pi)
    sources = {
        s: SourceMeans(
            n=len(pos) + len(neg),
            mean_p_correct=round(mean(pos), 6) if len(pos) >= 2 else None,
            mean_p_wrong=round(mean(neg), 6) if len(neg) >= 2 else None,
        )
        for s, (pos, neg) in sorted(by_source.items())
    }
    both = [
        (m.mean_p_correct, m.mean_p_wrong)
        for m in sources.values()
        if m.mean_p_correct is not None and m.mean_p_wrong is not None
    ]
    cs, ws = [c for c, _ in both], [w for _, w in both]
    return TransferSpread(
        sources=sources,
        mean_p_correct=round(mean(cs), 6) if cs else 0.5,
        mean_p_wrong=round(mean(ws), 6) if ws else 0.5,
        sd_p_correct=round(variance(cs) ** 0.5, 6),
        sd_p_wrong=round(variance(ws) ** 0.5, 6),
        n_sources=len(both),
    )


def _weight_share(points: Sequence[Point], weights: Sequence[float]) -> dict[str, dict[str, float]]:
    total = sum(weights)
    out: dict[str, dict[str, float]] = {}
    for pt, w in zip(points, weights, strict=True):
        row = out.setdefault(pt.source, {"records": 0.0, "weight": 0.0})
        row["records"] += 1 / len(points)
        row["weight"] += w / total
    return {k: {kk: round(vv, 4) for kk, vv in v.items()} for k, v in sorted(out.items())}
