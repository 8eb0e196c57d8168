"""The agreement statistics: κ and the rates by hand, judge errors as wrong predictions, the
exact binomial draws, the bootstrap interval and the κ-maximising threshold."""

from __future__ import annotations

import random
import statistics

import pytest

from stef.calibrate.agreement import (
    Confusion,
    Item,
    accuracy,
    balanced_accuracy,
    best_threshold,
    binomial,
    confusion,
    confusion_at,
    kappa,
    kappa_ci,
    sensitivity,
    specificity,
)


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        # The textbook table: po = 35/50 = 0.7, pe = 0.6*0.5 + 0.4*0.5 = 0.5, κ = 0.2/0.5.
        ((20, 5, 15, 10), 0.4),
        ((30, 0, 20, 0), 1.0),  # perfect agreement
        ((25, 25, 25, 25), 0.0),  # chance
        ((0, 10, 0, 10), -1.0),  # perfect disagreement, balanced marginals
        # po = 0.85, labels 50/100 positive, predictions 45/100: pe = .5*.45 + .5*.55 = 0.5
        ((40, 5, 45, 10), 0.7),
        # Constant predictions carry no information: κ = 0.
        ((60, 40, 0, 0), 0.0),
    ],
)
def test_kappa_hand_computed(cells: tuple[int, int, int, int], expected: float) -> None:
    assert kappa(Confusion(*cells)) == pytest.approx(expected)


def test_kappa_undefined_with_one_label_class() -> None:
    # Every item wrong (an error-type group): κ says nothing whatever the judge does.
    assert kappa(Confusion(tp=0, fp=3, tn=7, fn=0)) is None
    assert kappa(Confusion(tp=5, fp=0, tn=0, fn=2)) is None
    assert kappa(Confusion()) is None


def test_rates_hand_computed() -> None:
    c = Confusion(tp=20, fp=5, tn=15, fn=10)
    assert accuracy(c) == pytest.approx(0.7)
    assert sensitivity(c) == pytest.approx(20 / 30)
    assert specificity(c) == pytest.approx(15 / 20)
    assert balanced_accuracy(c) == pytest.approx((20 / 30 + 0.75) / 2)
    only_wrong = Confusion(fp=2, tn=3)
    assert sensitivity(only_wrong) is None
    assert balanced_accuracy(only_wrong) is None
    assert specificity(only_wrong) == pytest.approx(0.6)


def test_judge_errors_count_as_wrong_predictions() -> None:
    labels = [True, True, False, False, True, False]
    predicted: list[bool | None] = [True, None, False, None, False, True]
    # Error on a correct item -> false negative; on a wrong item -> false positive.
    assert confusion(labels, predicted) == Confusion(tp=1, fp=2, tn=1, fn=2)


def test_items_without_score_are_errors_at_every_threshold() -> None:
    items = [Item(True, None), Item(False, None), Item(True, 90.0), Item(False, 10.0)]
    for t in (0.0, 50.0, 100.0):
        c = confusion_at(items, t)
        assert c.fn >= 1 and c.fp >= 1
    assert confusion_at(items, 75.0) == Confusion(tp=1, fp=1, tn=1, fn=1)


def test_binomial_matches_its_moments() -> None:
    rng = random.Random(3)
    for n, p in [(2000, 0.3), (40, 0.1), (500, 0.8), (7, 0.5)]:
        xs = [binomial(rng, n, p) for _ in range(6000)]
        assert all(0 <= x <= n for x in xs)
        assert statistics.mean(xs) == pytest.approx(n * p, rel=0.03, abs=0.1)
        assert statistics.variance(xs) == pytest.approx(n * p * (1 - p), rel=0.1)
    assert binomial(rng, 10, 0.0) == 0
    assert binomial(rng, 10, 1.0) == 10


def test_kappa_ci_properties() -> None:
    c = Confusion(tp=400, fp=100, tn=350, fn=150)
    k = kappa(c)
    ci = kappa_ci(c, resamples=2000, seed=7)
    assert k is not None and ci is not None
    lo, hi = ci
    assert lo < k < hi
    assert kappa_ci(c, resamples=2000, seed=7) == ci  # seeded: reproducible
    # Ten times the data: a narrower interval around the same κ.
    big = kappa_ci(Confusion(4000, 1000, 3500, 1500), resamples=2000, seed=7)
    assert big is not None and big[1] - big[0] < (hi - lo) / 2
    assert kappa_ci(Confusion(fp=3, tn=4), resamples=2000) is None


def test_kappa_ci_agrees_with_resampling_items() -> None:
    c = Confusion(tp=60, fp=20, tn=50, fn=30)
    cells = [0] * c.tp + [1] * c.fp + [2] * c.tn + [3] * c.fn
    rng = random.Random(11)
    naive = []
    for _ in range(2000):
        d = rng.choices(cells, k=len(cells))
        k = kappa(Confusion(d.count(0), d.count(1), d.count(2), d.count(3)))
        assert k is not None
        naive.append(k)
    naive.sort()
    ci = kappa_ci(c, resamples=2000, seed=1)
    assert ci is not None
    assert ci[0] == pytest.approx(naive[50], abs=0.04)
    assert ci[1] == pytest.approx(naive[1949], abs=0.04)


def test_best_threshold_maximises_kappa() -> None:
    # Correct items score 60-70, wrong ones 30-50 and a few at 80: 60 separates best.
    items = [Item(True, s) for s in (60.0, 65.0, 70.0, 70.0, 65.0)]
    items += [Item(False, s) for s in (30.0, 40.0, 50.0, 50.0)]
    items += [Item(False, 80.0)]
    best = best_threshold(items, 75.0)
    assert best is not None
    assert best.value == 60.0
    assert best.kappa == pytest.approx(kappa(confusion_at(items, 60.0)))
    for t in (30.0, 40.0, 50.0, 65.0, 70.0, 75.0, 80.0, 81.0):
        k = kappa(confusion_at(items, t))
        assert k is None or k <= best.kappa


def test_best_threshold_ties_go_to_the_nearest_default() -> None:
    items = [Item(True, 90.0), Item(False, 10.0)]
    # Every threshold in (10, 90] separates perfectly; 90 is the candidate nearest 75.
    best = best_threshold(items, 75.0)
    assert best is not None and best.value == 90.0 and best.kappa == pytest.approx(1.0)
    assert best_threshold([Item(True, None)], 75.0) is None
