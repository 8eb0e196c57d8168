"""The agreement statistics of calibration: the confusion counts, Cohen's κ with a bootstrap
interval, and the κ-maximising pass threshold (the exact binomial draws that interval needs)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from stef.stats import quantile

DEFAULT_THRESHOLD = 75.0
MIN_RESAMPLES = 2000


@dataclass(frozen=True)
class Confusion:
    """Counts of (prediction, label) pairs; the positive class is "correct"."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    def as_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn}


def confusion(labels: Sequence[bool], predicted: Sequence[bool | None]) -> Confusion:
    """Count the pairs. ``None`` is a judge error and counts as the wrong prediction."""
    if len(labels) != len(predicted):
        raise ValueError("labels and predictions differ in length")
    tp = fp = tn = fn = 0
    for label, pred in zip(labels, predicted, strict=True):
        if pred is None:
            pred = not label
        if pred and label:
            tp += 1
        elif pred:
            fp += 1
        elif label:
            fn += 1
        else:
            tn += 1
    return Confusion(tp, fp, tn, fn)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def accuracy(c: Confusion) -> float | None:
    return _ratio(c.tp + c.tn, c.n)


def sensitivity(c: Confusion) -> float | None:
    """Recall of the positive class (correct SQL passed); ``None`` without positives."""
    return _ratio(c.tp, c.tp + c.fn)


def specificity(c: Confusion) -> float | None:
    """Recall of the negative class (wrong SQL failed); ``None`` without negatives."""
    return _ratio(c.tn, c.tn + c.fp)


def balanced_accuracy(c: Confusion) -> float | None:
    sens, spec = sensitivity(c), specificity(c)
    return None if sens is None or spec is None else (sens + spec) / 2


def kappa(c: Confusion) -> float | None:
    """Cohen's κ between judge and labels; ``None`` unless both label classes occur."""
    n = c.n
    if n == 0 or c.tp + c.fn == 0 or c.tn + c.fp == 0:
        return None
    observed = (c.tp + c.tn) / n
    expected = ((c.tp + c.fn) * (c.tp + c.fp) + (c.tn + c.fp) * (c.tn + c.fn)) / (n * n)
    return (observed - expected) / (1 - expected)


def kappa_ci(
    c: Confusion, *, resamples: int = MIN_RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of κ: resample the items with replacement ``resamples`` times.

    κ depends only on the four counts, so resampling items is drawing the counts from a
    multinomial over the cells (exact, and O(1) per resample instead of O(n)); resamples where
    κ is undefined (one label class drawn) are skipped. ``None`` when κ itself is undefined.
    """
    if kappa(c) is None:
        return None
    rng = random.Random(seed)
    cells = (c.tp, c.fp, c.tn, c.fn)
    values: list[float] = []
    for _ in range(resamples):
        k = kappa(Confusion(*_multinomial(rng, c.n, cells)))
        if k is not None:
            values.append(k)
    if not values:
        return None
    alpha = (1 - level) / 2
    return quantile(values, alpha), quantile(values, 1 - alpha)


def _multinomial(rng: random.Random, n: int, weights: Sequence[int]) -> list[int]:
    """Counts of ``n`` draws over cells with probabilities proportional to ``weights``."""
    out: list[int] = []
    left, rest = n, sum(weights)
    for w in weights[:-1]:
        x = binomial(rng, left, w / rest) if rest and left else 0
        out.append(x)
        left -= x
        rest -= w
    out.append(left)
    return out


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One Binomial(n, p) draw, exact (CPython 3.12's ``binomialvariate``, BTRS by Hörmann 1993).

    Kept here rather than taken from ``random`` so a seed gives the same CI on every Python.
    """
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        return _binomial_by_gaps(rng, n, p)
    return _binomial_btrs(rng, n, p)


def _binomial_by_gaps(rng: random.Random, n: int, p: float) -> int:
    """Binomial(n, p) for small ``n * p``: count geometric gaps between successes."""
    x = y = 0
    c = math.log(1.0 - p)
    if not c:
        return x
    while True:
        y += math.floor(math.log(1.0 - rng.random()) / c) + 1
        if y > n:
            return x
        x += 1


def _binomial_btrs(rng: random.Random, n: int, p: float) -> int:
    """Binomial(n, p) for ``n * p >= 10`` and ``p <= 0.5``: transformed rejection (BTRS)."""
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / (1.0 - p))
    m = math.floor((n + 1) * p)
    h = math.lgamma(m + 1) + math.lgamma(n - m + 1)
    while True:
        u = rng.random() - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rng.random()
        if us >= 0.07 and v <= vr:
            return k
        v *= alpha / (a / (us * us) + b)
        if v > 0 and math.log(v) <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - m) * lpq:
            return k


@dataclass(frozen=True)
class Item:
    """One labelled record and what the judge made of it (``score`` None: judge error)."""

    label: bool
    score: float | None
    source: str | None = None
    app: str | None = None
    complexity: str | None = None
    error_types: tuple[str, ...] = ()
    verdict: str | None = None
    raw: float | None = None
    p_correct: float | None = None
    invalid: str | None = None  # the dead-letter reason of a record that is not valid input

    def predicted(self, threshold: float) -> bool | None:
        return None if self.score is None else self.score >= threshold


def confusion_at(items: Sequence[Item], threshold: float) -> Confusion:
    return confusion([i.label for i in items], [i.predicted(threshold) for i in items])


@dataclass(frozen=True)
class Threshold:
    value: float
    kappa: float | None
    balanced_accuracy: float | None


def best_threshold(items: Sequence[Item], default: float = DEFAULT_THRESHOLD) -> Threshold | None:
    """The pass threshold that maximises κ, among the scores that occur (ties: nearest default).

    Predicting "correct" at ``score >= t`` only changes when ``t`` crosses a score that occurs,
    so those scores (and one above the highest: pass nothing) are every distinct choice.
    """
    scores = sorted({i.score for i in items if i.score is not None})
    if not scores:
        return None
    best: Threshold | None = None
    best_key: tuple[float, float] | None = None
    for t in [*scores, scores[-1] + 1]:
        c = confusion_at(items, t)
        k = kappa(c)
        if k is None:
            continue
        key = (k, -abs(t - default))
        if best_key is None or key > best_key:
            best, best_key = Threshold(t, k, balanced_accuracy(c)), key
    return best
