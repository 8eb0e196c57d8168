"""Golden tests of the structural comparison, one titled case per entry of
tests/fixtures/compare/*.yaml: ``equal.yaml`` (rewrites that must compare equal) and
``different.yaml`` (queries that must differ, by the components named). Each case gives
``title``, ``generated``, ``reference``, optional ``dialect`` (default sqlite), optional
``ordered`` (the question asks for an order) and ``expect``: ``equivalent: true`` or
``differs: [component, ...]``. No difference may show an internal alias (``_col_1``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.calibrate.labels import reformat_sql
from stef.sql.compare import COMPONENTS, compare
from tests.golden import load_golden

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compare"
KEYS = {"title", "generated", "reference", "dialect", "ordered", "expect", "xfail"}


def _check(name: str, case: Any) -> None:
    assert set(case) <= KEYS, f"{name}: unknown keys {set(case) - KEYS}"
    expect = case["expect"]
    assert set(expect) in ({"equivalent"}, {"differs"}), f"{name}: {case['title']}"
    assert set(expect.get("differs", [])) <= set(COMPONENTS), f"{name}: {case['title']}"


CASES = load_golden(FIXTURES, _check)


@pytest.mark.parametrize("case", CASES)
def test_compare_golden(case: dict[str, Any]) -> None:
    dialect = case.get("dialect", "sqlite")
    found = compare(
        case["generated"], case["reference"], dialect, ordered=case.get("ordered", False)
    )
    shown = [f"{d.component}: {d.generated} | {d.reference}" for d in found.differences]
    assert not any("_col_" in text for text in shown), shown
    if case["expect"].get("equivalent"):
        assert found.equivalent, shown
        # Formatting never matters: the same verdict on the re-formatted text.
        again = compare(reformat_sql(case["generated"], dialect), case["reference"], dialect)
        assert again.equivalent, again.differences
    else:
        assert found.error is None
        assert set(case["expect"]["differs"]) <= {d.component for d in found.differences}, shown
