"""Prediction-powered accuracy: the 95% interval covers the true accuracy in at least 93% of
1,000 simulated draws, whether the judge is good, useless or biased."""

from __future__ import annotations

import functools
import random

import pytest

from stef.calibrate.estimate import estimate, ppi_mean, wilson

N, N_LABELLED, DRAWS = 1000, 100, 1000


@functools.cache
def _coverage(judge: str, seed: int = 7) -> tuple[float, float]:
    """Share of draws whose interval holds the records' true accuracy, and mean width."""
    rng = random.Random(seed)
    covered, width = 0, 0.0
    for _ in range(DRAWS):
        # Most records clearly right or clearly wrong, as agents' answers are.
        truth_p = [rng.betavariate(0.6, 0.3) for _ in range(N)]
        ys = [1.0 if rng.random() < p else 0.0 for p in truth_p]
        if judge == "good":
            f = truth_p
        elif judge == "useless":
            f = [0.5] * N
        else:  # biased: 0.25 too optimistic, clipped
            f = [min(1.0, p + 0.25) for p in truth_p]
        picked = rng.sample(range(N), N_LABELLED)
        ci = ppi_mean(f, [(f[i], ys[i]) for i in picked])
        true_accuracy = sum(ys) / N
        covered += ci.low <= true_accuracy <= ci.high
        width += ci.high - ci.low
    return covered / DRAWS, width / DRAWS


@pytest.mark.parametrize("judge", ["good", "useless", "biased"])
def test_interval_covers_the_true_accuracy(judge: str) -> None:
    coverage, _ = _coverage(judge)
    assert coverage >= 0.93


def test_a_good_judge_narrows_the_interval() -> None:
    _, good = _coverage("good")
    _, useless = _coverage("useless")
    assert good < useless * 0.8


def test_estimate_needs_p_correct_on_every_record_and_two_labels() -> None:
    labels = {"a": True, "b": False}
    assert estimate({"a": 0.9, "b": None, "c": 0.5}, labels).ppi is None
    assert estimate({"a": 0.9, "b": 0.2, "c": 0.5}, {"a": True}).ppi is None
    full = estimate({"a": 0.9, "b": 0.2, "c": 0.5}, labels)
    assert full.ppi is not None and full.n == 3 and full.n_labelled == 2
    # mean f = 0.5333, rectifier mean((1-0.9), (0-0.2)) = -0.05
    assert full.ppi.estimate == pytest.approx(0.48333, abs=1e-4)
    assert full.labels_only is not None and full.labels_only.estimate == 0.5


def test_wilson_is_sound_at_the_edges() -> None:
    ci = wilson(10, 10)
    assert ci.estimate == 1.0 and ci.high == pytest.approx(1.0) and 0.6 < ci.low < 0.8
