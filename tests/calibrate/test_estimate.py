"""Accuracy with labels (PPI++, :mod:`stef.accuracy`): the 95% interval covers the true accuracy
in at least 93% of 1,000 simulated draws, whether the judge is good, useless or biased, and it is
never wider than the interval of the labels alone."""

from __future__ import annotations

import functools
import random

import pytest

from stef.accuracy import ppi_plus, wilson, with_labels

N, N_LABELLED, DRAWS = 1000, 100, 1000


@functools.cache
def _simulate(judge: str, n_labelled: int = N_LABELLED, seed: int = 7) -> tuple[float, float, int]:
    """Share of draws whose interval holds the records' true accuracy, mean width, and how many
    draws were wider than the labels-only interval."""
    rng = random.Random(seed)
    covered, width, wider = 0, 0.0, 0
    for _ in range(DRAWS):
        truth_p = [rng.betavariate(0.6, 0.3) for _ in range(N)]
        ys = [1.0 if rng.random() < p else 0.0 for p in truth_p]
        if judge == "good":
            f = truth_p
        elif judge == "useless":
            f = [rng.random() for _ in range(N)]
        else:  # biased: 0.25 too optimistic, clipped
            f = [min(1.0, p + 0.25) for p in truth_p]
        picked = rng.sample(range(N), n_labelled)
        ci = ppi_plus(f, [(f[i], ys[i]) for i in picked]).interval
        only = wilson(int(sum(ys[i] for i in picked)), n_labelled)
        covered += ci.covers(sum(ys) / N)
        width += ci.width
        wider += ci.width > only.width + 1e-12
    return covered / DRAWS, width / DRAWS, wider


@pytest.mark.parametrize("judge", ["good", "useless", "biased"])
def test_interval_covers_the_true_accuracy(judge: str) -> None:
    coverage, _, _ = _simulate(judge)
    assert coverage >= 0.93


@pytest.mark.parametrize("judge", ["good", "useless", "biased"])
@pytest.mark.parametrize("n_labelled", [50, 100])
def test_never_wider_than_the_labels_alone(judge: str, n_labelled: int) -> None:
    _, _, wider = _simulate(judge, n_labelled)
    assert wider == 0


def test_a_good_judge_narrows_the_interval() -> None:
    _, good, _ = _simulate("good")
    _, useless, _ = _simulate("useless")
    assert good < useless * 0.8


def test_a_useless_judge_gets_no_weight() -> None:
    f = [0.5] * 200
    pairs = [(0.5, float(i % 2)) for i in range(40)]
    ppi = ppi_plus(f, pairs)
    assert ppi.weight == 0.0 and ppi.interval == wilson(20, 40)


def test_estimate_needs_p_correct_on_every_record_and_two_labels() -> None:
    labels = {"a": True, "b": False}
    assert with_labels({"a": 0.9, "b": None, "c": 0.5}, labels).ppi is None
    assert with_labels({"a": 0.9, "b": 0.2, "c": 0.5}, {"a": True}).ppi is None
    full = with_labels({"a": 0.9, "b": 0.2, "c": 0.5}, labels)
    assert full.ppi is not None and full.n == 3 and full.n_labelled == 2
    assert full.labels_only is not None and full.labels_only.estimate == 0.5
    # Two labels are too few for the judge to narrow anything: the labels' interval stands.
    assert full.ppi.interval.width <= full.labels_only.width


def test_wilson_is_sound_at_the_edges() -> None:
    ci = wilson(10, 10)
    assert ci.estimate == 1.0 and ci.high == pytest.approx(1.0) and 0.6 < ci.low < 0.8
