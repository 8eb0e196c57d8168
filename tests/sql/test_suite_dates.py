"""Date truncation and interval arithmetic on the generated SQLite databases
(stef.sql.suite_dates): what SQLite lacks, as the dialects mean it."""

from __future__ import annotations

import sqlite3

import pytest
import sqlglot

from stef.sql.suite_dates import (
    NOW,
    constant_date,
    constant_year,
    instant_of,
    now_at,
    plain_days,
    portable,
    register,
)


def _value(sql: str, dialect: str) -> object:
    conn = sqlite3.connect(":memory:")
    register(conn)
    try:
        text = portable(sqlglot.parse_one(sql, read=dialect)).sql(dialect="sqlite")
        return conn.execute(text).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("sql", "dialect", "expected"),
    [
        ("SELECT date_trunc('month', '2020-06-15')", "postgres", "2020-06-01"),
        ("SELECT DATE_TRUNC('QUARTER', '2020-08-15')", "snowflake", "2020-07-01"),
        ("SELECT date_trunc('week', '2020-06-18')", "postgres", "2020-06-15"),
        ("SELECT date_trunc('hour', '2020-06-15 10:42:00')", "postgres", "2020-06-15 10:00:00"),
        ("SELECT '2020-03-31' - INTERVAL '1 month'", "postgres", "2020-02-29"),
        ("SELECT '2020-06-15' + INTERVAL '7 days'", "postgres", "2020-06-22"),
        ("SELECT DATEADD(day, -7, '2020-06-15')", "snowflake", "2020-06-08"),
        ("SELECT DATE_SUB('2020-01-15', INTERVAL 1 YEAR)", "mysql", "2019-01-15"),
        ("SELECT date_trunc('month', 'not a date')", "postgres", None),
    ],
)
def test_dates_as_the_dialect_means_them(sql: str, dialect: str, expected: object) -> None:
    assert _value(sql, dialect) == expected


def test_a_column_free_date_expression_is_folded_and_one_with_a_column_is_not() -> None:
    folded = sqlglot.parse_one("DATEADD(day, -7, '2020-06-15')", read="snowflake")
    assert constant_date(folded) == "2020-06-08"
    assert constant_date(sqlglot.parse_one("d - INTERVAL '7 days'", read="postgres")) is None


@pytest.mark.parametrize(
    "sql",
    [
        # A recursive CTE counting to 10^9 inside the modifier: it ran past the record's CPU
        # budget (checked only once SQLite returned), over 150 s for one gold_sql record.
        "DATE('now', '-' || (WITH RECURSIVE c AS (SELECT 1 UNION ALL SELECT 1 FROM c) "
        "SELECT COUNT(*) FROM (SELECT 1 FROM c LIMIT 1000000000)) || ' days')",
        # A blob of 1 GB: the process took 1.1 GB.
        "DATE('now', '-' || LENGTH(RANDOMBLOB(1000000000)) || ' days')",
    ],
    ids=["recursive-count", "huge-blob"],
)
def test_a_constant_expression_is_evaluated_within_bounds_or_not_at_all(sql: str) -> None:
    assert constant_date(sqlglot.parse_one(sql, read="sqlite")) is None
    # The bound is far above what a date needs.
    deep = "DATE('now', '-7 days', '+1 day', 'start of month', '+3 months', 'weekday 1')"
    assert constant_date(sqlglot.parse_one(deep, read="sqlite")) is not None


def test_now_is_pinned_in_every_spelling() -> None:
    sql = (
        "SELECT CURRENT_TIMESTAMP, CURRENT_DATE, DATE('now'), STRFTIME('%Y', 'NOW'), DATETIME(), "
        "x FROM t WHERE s = 'now'"
    )
    written = portable(sqlglot.parse_one(sql, read="sqlite")).sql(dialect="sqlite")
    assert written.count(NOW) == 4 and f"'{NOW[:10]}'" in written
    assert "s = 'now'" in written  # a value compared with, not a time read


def test_a_date_before_now_is_the_same_whatever_the_day() -> None:
    node = sqlglot.parse_one("CURRENT_DATE - INTERVAL '7 days'", read="postgres")
    assert constant_date(node) == "2020-06-08"
    assert constant_year(sqlglot.parse_one("STRFTIME('%Y', 'now')", read="sqlite")) == 2020


@pytest.mark.parametrize(
    ("timestamp", "instant"),
    [
        ("2025-06-03T16:56:25.163Z", "2025-06-03 16:56:25"),
        ("2025-06-03T23:10:28+02:00", "2025-06-03 23:10:28"),  # its own clock
        ("2025-06-03", "2025-06-03 00:00:00"),
        (" 2025-06-03 08:00:00 ", "2025-06-03 08:00:00"),
        ("yesterday", None),
        ("0999-12-31", None),
        ("", None),
        (None, None),
    ],
)
def test_a_records_timestamp_as_the_instant_now_stands_for(
    timestamp: str | None, instant: str | None
) -> None:
    assert instant_of(timestamp) == instant


def test_now_is_when_the_question_was_asked_within_the_block_and_pinned_after() -> None:
    year = sqlglot.parse_one("STRFTIME('%Y', 'now')", read="sqlite")
    week = sqlglot.parse_one("CURRENT_DATE - INTERVAL '7 days'", read="postgres")
    with now_at("2025-06-03 16:56:25"):
        assert constant_year(year) == 2025
        assert constant_date(week) == "2025-05-27"
        assert plain_days() == ("2025-01-01", "2025-06-03", "2026-03-01")
        written = portable(sqlglot.parse_one("SELECT CURRENT_DATE", read="postgres"))
        assert "'2025-06-03'" in written.sql(dialect="sqlite")
    assert constant_year(year) == 2020
    assert plain_days() == ("2020-01-01", NOW[:10], "2021-03-01")
    with now_at(None):
        assert constant_date(week) == "2020-06-08"
