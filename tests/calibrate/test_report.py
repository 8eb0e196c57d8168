"""The calibration report: its keys and its breakdowns by dimension."""

from __future__ import annotations

from stef.calibrate.agreement import Item
from stef.calibrate.report import DIMENSIONS, report
from tests.calibrate.conftest import KEYS, OVERALL_KEYS


def test_report_keys_and_breakdowns() -> None:
    items = [
        Item(True, 90.0, "A", "bird", "easy", (), "Correct"),
        Item(False, 40.0, "A", "bird", "medium", ("Value Mismatch", "DISTINCT"), "Incorrect"),
        Item(False, 95.0, "B", "spider", "easy", ("DISTINCT",), "Correct"),
        Item(True, None, "B", "spider", None, (), None),
    ]
    rep = report(items, 75.0, resamples=2000, seed=0)
    assert set(rep) == KEYS | OVERALL_KEYS
    assert rep["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 1}
    assert rep["judge_errors"] == 1
    assert len(rep["kappa_ci"]) == 2
    assert set(rep["breakdown"]) == set(DIMENSIONS)
    by_type = rep["breakdown"]["error_type"]
    assert by_type["DISTINCT"]["n"] == 2  # an item counts under each of its types
    assert by_type["Value Mismatch"]["n"] == 1
    assert by_type["DISTINCT"]["kappa"] is None and by_type["DISTINCT"]["specificity"] == 0.5
    assert rep["breakdown"]["verdict"]["judge_error"]["judge_errors"] == 1
    assert rep["breakdown"]["complexity"]["unknown"]["n"] == 1
    assert set(rep["breakdown"]["source"]["A"]) == KEYS - {"breakdown"}
