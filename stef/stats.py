"""Quantiles of a sample: the P90 of ``stef summary`` and the bootstrap interval of calibration."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

Method = Literal["linear", "nearest_rank"]


def quantile(values: Iterable[float], q: float, method: Method = "linear") -> float:
    """The ``q`` quantile (``q`` in 0..1) of ``values``, in any order.

    Args:
        values: the sample; at least one value.
        q: the quantile as a fraction (0.9 for P90).
        method: ``"linear"`` interpolates between the closest ranks (numpy's default,
            ``method="linear"``): the bootstrap interval uses it. ``"nearest_rank"`` is the
            smallest value with at least ``q`` of the sample at or below it (numpy's
            ``method="inverted_cdf"``): always a value that occurred, as a report's P90 should be.

    Raises:
        ValueError: no values, or ``q`` outside 0..1.
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q!r} is outside 0..1")
    if method == "nearest_rank":
        return ordered[max(1, math.ceil(q * len(ordered))) - 1]
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
