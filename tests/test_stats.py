"""The one quantile function: linear interpolation for the bootstrap interval, nearest rank for
the summary's P90, both by hand."""

from __future__ import annotations

import pytest

from stef.stats import quantile

DECILES = [100.0, 10.0, 90.0, 20.0, 80.0, 30.0, 70.0, 40.0, 60.0, 50.0]  # any order


@pytest.mark.parametrize(
    ("q", "linear", "nearest_rank"),
    [
        (0.0, 10.0, 10.0),
        # Position 0.9 * 9 = 8.1: a tenth of the way from 90 to 100; nearest rank ceil(9) = 9th.
        (0.9, 91.0, 90.0),
        # Position 4.5: halfway between 50 and 60; nearest rank ceil(5) = 5th.
        (0.5, 55.0, 50.0),
        # Position 0.225: between 10 and 20; nearest rank ceil(0.25) = 1st.
        (0.025, 12.25, 10.0),
        (1.0, 100.0, 100.0),
    ],
)
def test_quantile_by_hand(q: float, linear: float, nearest_rank: float) -> None:
    assert quantile(DECILES, q) == pytest.approx(linear)
    assert quantile(DECILES, q, "nearest_rank") == nearest_rank


def test_nearest_rank_is_always_a_value_that_occurred() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    for q in (0.1, 0.3, 0.5, 0.75, 0.9, 0.99):
        assert quantile(values, q, "nearest_rank") in values
    assert quantile(values, 0.5) == 2.5  # linear falls between


def test_one_value_is_every_quantile() -> None:
    assert quantile([7.0], 0.0) == quantile([7.0], 0.9) == quantile([7.0], 0.9, "nearest_rank")
    assert quantile([7.0], 1.0, "nearest_rank") == 7.0


def test_no_values_or_a_bad_q_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="outside"):
        quantile([1.0], 90)
