"""Periods and windows relative to now (stef.judges.heuristic.readings): the day a record's
question was asked, the days a period may start on, and the SQL's date predicates read on that
day; what cannot be read is left to the value matching, never a contradiction."""

from __future__ import annotations

from datetime import date

import pytest

from stef.judges.heuristic.judge import match_filters
from stef.judges.heuristic.readings import DateColumns, NowDates, asked_day, period_starts
from stef.models import QuestionFilter
from stef.stages.sqlspec import sqlspec


@pytest.mark.parametrize(
    ("timestamp", "day", "known"),
    [
        ("2025-06-03T23:10:28.826Z", date(2025, 6, 3), True),
        ("2025-06-03T23:10:28-08:00", date(2025, 6, 3), True),  # its own clock
        (None, date(2020, 6, 15), False),
        ("last Tuesday", date(2020, 6, 15), False),
        ("9999-12-31T23:59:59Z", date(2020, 6, 15), False),  # no day after it
        ("1000-01-01", date(2020, 6, 15), False),
    ],
)
def test_the_day_a_question_was_asked(timestamp: str | None, day: date, known: bool) -> None:
    _, today, said = asked_day(timestamp)
    assert (today, said) == (day, known)


def test_the_days_a_period_starts_on_and_the_day_after_it() -> None:
    today = date(2025, 6, 4)  # a Wednesday
    assert period_starts("today", today) == ([today], date(2025, 6, 5))
    assert period_starts("yesterday", today) == ([date(2025, 6, 3)], today)
    assert period_starts("this week", today) == (
        [date(2025, 6, 2), date(2025, 6, 1)],
        date(2025, 6, 8),
    )
    assert period_starts("this quarter", today) == ([date(2025, 4, 1)], date(2025, 7, 1))
    assert period_starts("this year", today) == ([date(2025, 1, 1)], date(2026, 1, 1))
    assert period_starts("30 day", today) is None


def _status(question_value: str, sql: str, timestamp: str | None = None) -> str:
    spec = sqlspec(sql, "postgres")
    q = QuestionFilter(rhs=question_value, text=question_value, kind="period")
    (found,) = match_filters([q], ["period"], spec, sql, timestamp)
    return found.status


def test_many_predicates_that_read_now_are_not_read_and_may_be_the_period() -> None:
    # Each folding parses its predicate again: past 8 of them none is folded, and the period
    # is not contradicted by what was not read.
    wrong_year = "EXTRACT(YEAR FROM d) = EXTRACT(YEAR FROM CURRENT_DATE) - 1"
    assert _status("this year", f"SELECT 1 FROM t WHERE {wrong_year}") == "mismatched"
    many = " AND ".join(f"c{i} >= CURRENT_DATE - {i}" for i in range(40))
    assert _status("this year", f"SELECT 1 FROM t WHERE {wrong_year} AND {many}") == "matched"


def test_a_long_predicate_is_not_folded() -> None:
    values = ", ".join(f"'{i:05d}'" for i in range(150))
    sql = f"SELECT 1 FROM t WHERE d < CURRENT_DATE - 1 OR k IN ({values})"
    spec = sqlspec(sql, "postgres")
    now = NowDates(spec, [p.id for p in spec.filters], DateColumns.of(spec), None, sql)
    assert now.folded == {} and now.unfolded == [p.id for p in spec.filters]
    short = "SELECT 1 FROM t WHERE DATE(d) = CURRENT_DATE"
    assert _status("yesterday", short) == "mismatched"


def test_now_read_outside_the_filters_may_be_the_period() -> None:
    sql = "SELECT SUM(CASE WHEN d >= DATE_TRUNC('year', CURRENT_DATE) THEN amount END) FROM t"
    assert _status("this year", sql) == "matched"
    assert _status("this year", "SELECT SUM(amount) FROM t") == "missing"
    # "How many employees are active today?": the state now, with no date to keep.
    assert _status("today", "SELECT COUNT(*) FROM employees WHERE active") == "matched"
