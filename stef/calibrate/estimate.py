"""The agent's accuracy with a 95% confidence interval, from the judge's calibrated probabilities
and a sample of human labels: prediction-powered inference (Angelopoulos, Bates, Fannjiang,
Jordan, Zrnic, *Science* 382, 2023).

For N judged records with the judge's P(correct) ``f`` and n of them labelled ``y`` (1 correct,
0 incorrect)::

    estimate = mean(f over all N) + mean(y - f over the n labelled)
    variance = var(f) / N + var(y - f) / n

The second term, the *rectifier*, removes the judge's bias whatever it is; the interval is
narrower than the labels' own when the judge's errors ``y - f`` vary less than ``y`` does (a good
judge), and about as wide when they do not (a useless judge costs nothing but its calls). The
interval is valid only when the labelled records are a random sample of the judged ones (the
``random`` order of ``stef review``), not the records picked because they looked doubtful.

Beside it, the labels alone: the Wilson interval of the labelled records' accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Estimate:
    """One group's accuracy: ``ppi`` None when some record has no calibrated P(correct) or
    fewer than two are labelled; ``labels_only`` None with no label."""

    n: int
    n_labelled: int
    ppi: Interval | None
    labels_only: Interval | None
    missing_p: int

    def as_dict(self) -> dict[str, object]:
        ppi = self.ppi.as_dict() if self.ppi else {"estimate": None, "low": None, "high": None}
        return {
            **ppi,
            "n": self.n,
            "n_labelled": self.n_labelled,
            "without_p_correct": self.missing_p,
            "labels_only": self.labels_only.as_dict() if self.labels_only else None,
        }


def _var(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def ppi_mean(f_all: Sequence[float], pairs: Sequence[tuple[float, float]]) -> Interval:
    """Prediction-powered 95% interval of a mean: ``f_all`` the predictions of every record,
    ``pairs`` ``(prediction, label)`` of the labelled ones (at least two)."""
    rect = [y - f for f, y in pairs]
    est = sum(f_all) / len(f_all) + sum(rect) / len(rect)
    half = Z95 * math.sqrt(_var(f_all) / len(f_all) + _var(rect) / len(rect))
    return Interval(_clip(est), _clip(est - half), _clip(est + half))


def wilson(successes: int, n: int) -> Interval:
    """The Wilson score 95% interval of a proportion (sound with few labels and at 0 or 1)."""
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, _clip(centre - half), _clip(centre + half))


def estimate(p_correct: Mapping[str, float | None], labels: Mapping[str, bool]) -> Estimate:
    """The accuracy of the records ``p_correct`` names (``id -> P(correct)``, None when the
    judge gave none), with the ``labels`` of those among them that were labelled."""
    labelled = [rid for rid in p_correct if rid in labels]
    ys = [1.0 if labels[rid] else 0.0 for rid in labelled]
    missing = sum(1 for v in p_correct.values() if v is None)
    only = wilson(int(sum(ys)), len(ys)) if ys else None
    ppi = None
    if not missing and len(labelled) >= 2 and p_correct:
        f_all = [float(v) for v in p_correct.values() if v is not None]
        pairs = [(float(p_correct[rid] or 0.0), y) for rid, y in zip(labelled, ys, strict=True)]
        ppi = ppi_mean(f_all, pairs)
    return Estimate(len(p_correct), len(labelled), ppi, only, missing)
