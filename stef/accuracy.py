"""The agent's accuracy, computed in one place (issue 31): every command and metric that prints
an accuracy, an interval or an AUC calls this module, so the same file gives the same figure.

Without labels: **adjusted classify-and-count** (probabilistic; Bella et al. 2010). The window's
mean calibrated P(correct) ``m`` is corrected by how far apart the judge puts correct and wrong
SQL (``c = E[p | correct]``, ``w = E[p | wrong]`` on the calibration's labels)::

    accuracy = (m - w) / (c - w)

Its interval carries two uncertainties: the window's sampling noise (``z × sd(p) / sqrt(n)`` on
``m``) and the calibration's *transfer*: ``c`` and ``w`` measured on the calibration's sources
differ from the ones of the app's own traffic. The calibration file stores how much they
differ from one source to another (:class:`Transfer`); the interval is the range of the estimate
over ``m``'s sampling interval and the prediction interval of a new source's ``c`` and ``w``.
A window of any size therefore keeps the transfer's width: when the interval is wider than
:data:`MAX_HALF_WIDTH` either side, there is no estimate, and the reason says which part is wide.

With labels: **PPI++** (power-tuned prediction-powered inference; Angelopoulos, Duchi, Zrnic
2023). For ``N`` records with P(correct) ``f`` and ``n`` of them labelled ``y``::

    estimate = λ × mean(f over all N) + mean(y - λ f over the n labelled)

with ``λ`` the weight that minimises the interval's width (the labelled set is a subset of the
``N``, and the variance counts that overlap). ``λ = 0`` is the labels alone, so the judge can
only narrow the interval; when the tuned interval is not narrower than the labels' own Wilson
interval, the labels' interval is the answer.

Beside them: the Wilson interval of a proportion, the AUC, and the normal and Student quantiles.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

LEVEL = 0.95


def normal_quantile(level: float = LEVEL) -> float:
    """The two-sided normal quantile of ``level`` (1.959964 at 95%)."""
    return NormalDist().inv_cdf(0.5 + level / 2)


Z95 = normal_quantile(LEVEL)

# Wider than this either side and a label-free estimate is not shown: the judge cannot resolve it.
MAX_HALF_WIDTH = 0.10


@functools.lru_cache(maxsize=256)
def t_quantile(level: float, df: int) -> float:
    """The two-sided Student-t quantile of ``level`` with ``df`` degrees of freedom (bisection
    on the CDF; exact to 1e-9). Remembered: the quality metrics ask for the same one (the
    calibration's sources) at every record, and one costs about a millisecond."""
    if df < 1:
        raise ValueError("t quantile needs at least one degree of freedom")
    target = 0.5 + level / 2
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _t_cdf(t: float, df: int) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function (continued fraction, Lentz's method)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1) / (a + b + 2):
        return 1 - _betainc(b, a, 1 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / (d if abs(d) > 1e-30 else 1e-30)
        c = 1 + num / c if abs(c) > 1e-30 else 1e-30
        f *= c * d
        if abs(1 - c * d) < 1e-12:
            break
    return front * (f - 1) / a


@dataclass(frozen=True)
class Interval:
    """An estimate with its 95% interval, clipped to 0-1."""

    estimate: float
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def covers(self, x: float) -> bool:
        return self.low <= x <= self.high

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def variance(xs: Sequence[float]) -> float:
    """The sample variance (n - 1); 0 below two values."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def wilson(successes: int, n: int) -> Interval:
    """The Wilson score 95% interval of a proportion (sound with few labels and at 0 or 1)."""
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, clip(centre - half), clip(centre + half))


@dataclass(frozen=True)
class Ppi:
    """A PPI++ estimate: its interval and the judge's weight λ (0: the labels alone decided)."""

    interval: Interval
    weight: float


def ppi_plus(f_all: Sequence[float], pairs: Sequence[tuple[float, float]]) -> Ppi:
    """PPI++ 95% interval of a mean: ``f_all`` the predictions of all ``N`` records, ``pairs``
    ``(prediction, label)`` of the ``n`` labelled ones among them (at least two).

    With the labelled records a subset of the ``N``, the estimator's variance is
    ``var(y)/n - (1/n - 1/N) (2 λ cov(f, y) - λ² var(f))``, least at ``λ = cov / var(f)``
    (kept in 0-1); never more than the labels' own ``var(y)/n``."""
    n, big_n = len(pairs), len(f_all)
    fs = [f for f, _ in pairs]
    ys = [y for _, y in pairs]
    var_f = variance(f_all)
    mf, my = mean(fs), mean(ys)
    cov = sum((f - mf) * (y - my) for f, y in pairs) / (n - 1)
    lam = min(1.0, max(0.0, cov / var_f)) if var_f > 0 else 0.0
    gain = (1 / n - 1 / big_n) * (2 * lam * cov - lam * lam * var_f)
    var = max(0.0, variance(ys) / n - gain)
    est = lam * mean(f_all) + mean([y - lam * f for f, y in pairs])
    half = Z95 * math.sqrt(var)
    tuned = Interval(clip(est), clip(est - half), clip(est + half))
    only = wilson(round(sum(ys)), n)
    if lam == 0.0 or tuned.width >= only.width:
        return Ppi(only, 0.0)
    return Ppi(tuned, round(lam, 4))


@dataclass(frozen=True)
class Estimate:
    """One group's accuracy with labels: ``ppi`` (PPI++) None when some record has no
    P(correct) or fewer than two are labelled; ``labels_only`` (Wilson) None with no label."""

    n: int
    n_labelled: int
    ppi: Ppi | None
    labels_only: Interval | None
    missing_p: int

    def as_dict(self) -> dict[str, object]:
        ppi = self.ppi.interval.as_dict() if self.ppi else dict.fromkeys(_KEYS)
        return {
            **ppi,
            "judge_weight": None if self.ppi is None else self.ppi.weight,
            "n": self.n,
            "n_labelled": self.n_labelled,
            "without_p_correct": self.missing_p,
            "labels_only": self.labels_only.as_dict() if self.labels_only else None,
        }


_KEYS = ("estimate", "low", "high")


def with_labels(p_correct: Mapping[str, float | None], labels: Mapping[str, bool]) -> Estimate:
    """The accuracy of the records ``p_correct`` names (``id -> P(correct)``, None when the
    judge gave none: a reference's decision or a calibrated judge's), with the ``labels`` of
    those among them that were labelled: PPI++ and the labels alone."""
    labelled = [rid for rid in p_correct if rid in labels]
    ys = [1.0 if labels[rid] else 0.0 for rid in labelled]
    missing = sum(1 for v in p_correct.values() if v is None)
    only = wilson(int(sum(ys)), len(ys)) if ys else None
    ppi = None
    if not missing and len(labelled) >= 2 and p_correct:
        f_all = [float(v) for v in p_correct.values() if v is not None]
        pairs = [(float(p_correct[rid] or 0.0), y) for rid, y in zip(labelled, ys, strict=True)]
        ppi = ppi_plus(f_all, pairs)
    return Estimate(len(p_correct), len(labelled), ppi, only, missing)


@dataclass(frozen=True)
class Transfer:
    """How the calibration's class averages move from one source to another: the average over
    sources of E[p | correct] and E[p | wrong], their spread, and the multiplier of a 95%
    prediction interval for a source not seen (Student t with ``sources - 1`` degrees of
    freedom, times ``sqrt(1 + 1/sources)``)."""

    mean_p_correct: float
    mean_p_wrong: float
    sd_p_correct: float
    sd_p_wrong: float
    sources: int

    @property
    def k(self) -> float:
        return t_quantile(LEVEL, self.sources - 1) * math.sqrt(1 + 1 / self.sources)


@dataclass(frozen=True)
class LabelFree:
    """The label-free estimate of a window: ``interval`` None with ``reason`` when it declines;
    ``sampling`` and ``transfer`` the two parts of the half-width (before clipping)."""

    n: int
    interval: Interval | None
    reason: str | None
    half_width: float | None = None
    sampling: float | None = None
    transfer: float | None = None


def label_free(
    n: int,
    total: float,
    squares: float,
    mean_p_correct: float,
    mean_p_wrong: float,
    transfer: Transfer | None,
) -> LabelFree:
    """Adjusted classify-and-count of ``n`` p values given by their sum and sum of squares (a
    sliding window keeps these), with the interval of the module docstring, or the reason why
    there is none."""
    resolution = mean_p_correct - mean_p_wrong
    if n == 0:
        return LabelFree(0, None, "no calibrated p_correct in these results")
    if resolution <= 0:
        return LabelFree(n, None, "this judge does not separate correct from wrong SQL")
    if transfer is None or transfer.sources < 3:
        return LabelFree(
            n,
            None,
            "the calibration says nothing of how it transfers to other sources "
            "(fitted on fewer than 3 sources, or before format 2: refit it)",
        )
    m = total / n
    var = max(0.0, (squares - n * m * m) / (n - 1)) if n > 1 else 0.25
    # Never a zero-width interval: a window of identical p values still has binomial noise.
    sd = max(math.sqrt(var), 1 / math.sqrt(4 * n))
    sampling = Z95 * sd / math.sqrt(n)
    # A new source's class averages: the pooled ones, within the sources' prediction interval
    # (and never nearer than the sources' own average).
    k = transfer.k
    cs = _span(mean_p_correct, transfer.mean_p_correct, k * transfer.sd_p_correct)
    ws = _span(mean_p_wrong, transfer.mean_p_wrong, k * transfer.sd_p_wrong)
    if cs[0] - ws[1] <= 0:
        return LabelFree(
            n,
            None,
            f"the judge's averages for correct ({cs[0]:.2f}-{cs[1]:.2f}) and wrong SQL "
            f"({ws[0]:.2f}-{ws[1]:.2f}) overlap across its calibration's sources: without labels "
            "it cannot tell the agent's accuracy; label a random sample (stef estimate) or use "
            "references",
        )
    return _bounded(n, m, sampling, (mean_p_correct, mean_p_wrong), cs, ws)


def _bounded(
    n: int,
    m: float,
    sampling: float,
    pooled: tuple[float, float],
    cs: tuple[float, float],
    ws: tuple[float, float],
) -> LabelFree:
    """The estimate's range over ``m ± sampling`` and every corner of the class averages'
    box (the estimate is monotone in each), declined when wider than the bound."""
    resolution = pooled[0] - pooled[1]
    value = (m - pooled[1]) / resolution
    low = min((m - sampling - w) / (c - w) for c in cs for w in ws)
    high = max((m + sampling - w) / (c - w) for c in cs for w in ws)
    half = (high - low) / 2
    only_sampling = sampling / resolution
    if half > MAX_HALF_WIDTH:
        return LabelFree(
            n,
            None,
            f"its 95% CI over {n:,} records is ±{half:.2f} (sampling ±"
            f"{only_sampling:.2f}, transfer between sources ±{max(0.0, half - only_sampling):.2f}"
            "): label a random sample (stef estimate), use references or a stronger judge",
            round(half, 4),
            round(only_sampling, 4),
            round(max(0.0, half - only_sampling), 4),
        )
    interval = Interval(round(clip(value), 4), round(clip(low), 4), round(clip(high), 4))
    return LabelFree(
        n,
        interval,
        None,
        round(half, 4),
        round(only_sampling, 4),
        round(max(0.0, half - only_sampling), 4),
    )


def _span(pooled: float, across: float, spread: float) -> tuple[float, float]:
    return min(pooled, across) - spread, max(pooled, across) + spread


def detectable_drop(sd_p: float, resolution: float, window: int) -> float | None:
    """The smallest fall in accuracy between two windows of ``window`` records that the
    label-free estimate can tell from noise at 95%: ``z × sqrt(2) × sd(p) / (sqrt(window) ×
    resolution)``; None without resolution."""
    if resolution <= 0 or window < 1:
        return None
    return Z95 * math.sqrt(2) * sd_p / (math.sqrt(window) * resolution)


def auc(
    labels: Sequence[bool], scores: Sequence[float], weights: Sequence[float] | None = None
) -> float | None:
    """Area under the ROC curve: the chance a correct item scores above a wrong one (Mann-
    Whitney; ties count half; weights honoured); None without both classes."""
    ws = weights if weights is not None else [1.0] * len(labels)
    ordered = sorted(zip(scores, labels, ws, strict=True), key=lambda t: t[0])
    return auc_sorted(ordered)


def auc_sorted(points: Sequence[tuple[float, bool, float]]) -> float | None:
    """:func:`auc` of ``(score, label, weight)`` already sorted by score (a bootstrap reweights
    one sorted list)."""
    pos = sum(w for _, y, w in points if y)
    neg = sum(w for _, y, w in points if not y)
    if pos <= 0 or neg <= 0:
        return None
    below_neg = 0.0  # weight of negatives strictly below the current tie group
    total = 0.0
    i = 0
    while i < len(points):
        j = i
        tie_pos = tie_neg = 0.0
        while j < len(points) and points[j][0] == points[i][0]:
            if points[j][1]:
                tie_pos += points[j][2]
            else:
                tie_neg += points[j][2]
            j += 1
        total += tie_pos * (below_neg + tie_neg / 2)
        below_neg += tie_neg
        i = j
    return total / (pos * neg)
