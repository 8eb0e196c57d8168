"""Golden tests of execution on generated databases, one titled case per entry of
tests/fixtures/suite/*.yaml: ``title``, ``generated``, ``reference``, optional ``dialect``
(default sqlite), optional ``ordered``, optional ``now`` (when the question was asked, as a
record's ``timestamp``), ``expect: {status}``. Every case also holds the
contract: the same outcome on a second run (seeded per record), a counterexample exactly when
the status is ``different`` or ``duplicates``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from stef.errors import CpuBudgetSpent
from stef.sql.budget import CpuDeadline
from stef.sql.suite import run_suite
from stef.sql.suite_dates import instant_of
from tests.golden import load_golden

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "suite"
KEYS = {"title", "generated", "reference", "dialect", "ordered", "now", "expect", "xfail"}
STATUSES = {"same", "different", "duplicates", "undecided", "not_run"}


def _check(name: str, case: Any) -> None:
    assert set(case) <= KEYS, f"{name}: unknown keys {set(case) - KEYS}"
    assert case["expect"]["status"] in STATUSES, f"{name}: {case['title']}"


CASES = load_golden(FIXTURES, _check)


def _run(case: dict[str, Any]) -> Any:
    return run_suite(
        case["generated"],
        case["reference"],
        case.get("dialect", "sqlite"),
        ordered=case.get("ordered", False),
        n=8,
        timeout_s=5.0,
        max_rows=1000,
        now=instant_of(case.get("now")),
    )


@pytest.mark.parametrize("case", CASES)
def test_suite_golden(case: dict[str, Any]) -> None:
    found = _run(case)
    assert found.status == case["expect"]["status"], found.detail
    assert (found.counterexample is not None) == (found.status in ("different", "duplicates"))
    if found.status == "not_run":
        assert found.detail
    again = _run(case)
    assert (again.status, again.counterexample) == (found.status, found.counterexample)


def test_a_counterexample_holds_both_outputs_and_the_tables() -> None:
    found = run_suite(
        "SELECT COUNT(*) FROM singer WHERE country = 'Germany'",
        "SELECT COUNT(*) FROM singer WHERE country = 'France'",
        "sqlite",
        ordered=False,
        n=8,
        timeout_s=5.0,
        max_rows=1000,
    )
    example = found.counterexample
    assert example is not None
    assert example.columns == {"singer": ["country"]}
    assert example.generated != example.reference
    assert all(len(row) == 1 for row in example.tables["singer"])


# Counts rows without end: only a limit stops it.
_RUNAWAY = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT COUNT(*) FROM n, t WHERE t.a = 1"
)


def test_a_runaway_query_is_stopped_by_the_time_limit() -> None:
    found = run_suite(
        _RUNAWAY,
        "SELECT COUNT(*) FROM t WHERE a = 1",
        None,
        ordered=False,
        n=2,
        timeout_s=0.2,
        max_rows=10,
    )
    assert found.status == "not_run"
    assert "timed out" in found.detail


_COLUMNS = ", ".join(f"x * 1.5 + {i}" for i in range(20))
_MANY_ROWS = (
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 4000) "
    f"SELECT {_COLUMNS} FROM r, (SELECT 1 FROM t LIMIT 1)"
)


@pytest.mark.parametrize(
    ("generated", "reference", "n", "max_rows", "budget_s"),
    [
        # The wall clock gives it a minute; the record's CPU deadline stops SQLite's steps first.
        pytest.param(
            _RUNAWAY, "SELECT COUNT(*) FROM t WHERE a = 1", 2, 10, 0.2, id="a-runaway-query"
        ),
        # 4,000 rows of 20 columns keyed in Python on every database: 0.2 s a key, seconds a
        # suite.
        pytest.param(_MANY_ROWS, _MANY_ROWS, 8, 10_000, 0.3, id="many-rows-compared"),
    ],
)
def test_the_records_cpu_deadline_stops_the_suite(
    generated: str, reference: str, n: int, max_rows: int, budget_s: float
) -> None:
    started = time.thread_time()
    with pytest.raises(CpuBudgetSpent):
        run_suite(
            generated,
            reference,
            None,
            ordered=False,
            n=n,
            timeout_s=60.0,
            max_rows=max_rows,
            deadline=CpuDeadline.after(budget_s),
        )
    assert time.thread_time() - started < 1.0


@pytest.mark.parametrize(
    "generated",
    [
        # One value past the 64 KiB SQLite now allows there: the statement fails. It took 4.6 GB
        # and five minutes of one record (randomblob(999999999): the machine's 24 GB).
        "SELECT randomblob(99999999) FROM singer",
        "SELECT group_concat(hex(randomblob(50000))) FROM singer a, singer b",
        # A row of many values under it.
        "SELECT " + ", ".join(["randomblob(60000)"] * 300) + " FROM singer",
        # Values under it, on enough rows to pass 16 MiB in all.
        "SELECT randomblob(60000) FROM singer a, singer b, singer c, singer d",
    ],
    ids=["one-blob", "one-string", "wide-row", "many-rows"],
)
def test_a_query_making_values_past_the_size_limits_did_not_run(generated: str) -> None:
    found = run_suite(
        generated,
        "SELECT name FROM singer",
        "sqlite",
        ordered=False,
        n=8,
        timeout_s=30.0,
        max_rows=100_000,
    )
    assert found.status == "not_run"
    assert found.detail.startswith("the generated SQL failed on a generated database")
