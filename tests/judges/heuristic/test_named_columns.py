"""The columns an enrichment names that the SQL never uses (stef.judges.heuristic.named_columns)."""

from __future__ import annotations

import time

import pytest

from stef.judges.heuristic.named_columns import unused_columns

QUESTION = "Who paid first?"


@pytest.mark.parametrize(
    ("enriched", "sql", "unused"),
    [
        # Each way an enrichment writes a column, none of them in the SQL.
        ("first refers to MIN(received_date)", "SELECT name FROM income", ["received_date"]),
        ("first refers to `Date Received`", "SELECT name FROM income", ["date received"]),
        ("payer refers to member.last_name", "SELECT name FROM income", ["last_name"]),
        ("paid refers to amountPaid > 0", "SELECT name FROM income", ["amountpaid"]),
        # The same columns in the SQL, as they are or spelled a little otherwise.
        ("first refers to MIN(received_date)", "SELECT MIN(received_date) FROM i", []),
        ("first refers to MIN(received_date)", "SELECT MIN(date_received) FROM i", []),
        ("first refers to `Date Received`", "SELECT MIN(`date received`) FROM i", []),
        ("paid refers to amountPaid > 0", "SELECT name FROM i WHERE AmountPaid > 0", []),
        ("paid refers to amountPayed > 0", "SELECT name FROM i WHERE amountpaid > 0", []),
        ("paid refers to isPaid = 1", "SELECT name FROM i WHERE is_paid_flag = 1", []),
        ("paid refers to is_paid = 1", "SELECT name FROM i WHERE isPaid = 1", []),
        # Values, short names and keywords are no columns to look for.
        ("first refers to payer = 'some_member'", "SELECT name FROM income", []),
        ("first refers to MIN(date)", "SELECT name FROM income", []),
        ("now refers to CURRENT_TIMESTAMP", "SELECT name FROM income", []),
        # A bare value the enrichment writes, which the SQL compares as a string: used.
        ("open refers to in_progress", "SELECT id FROM tickets WHERE status = 'in_progress'", []),
        ("phones refers to iPhone", "SELECT id FROM sales WHERE product = 'iPhone 15'", []),
    ],
)
def test_unused_columns(enriched: str, sql: str, unused: list[str]) -> None:
    assert list(unused_columns(QUESTION, f"{QUESTION} {enriched}", sql)) == unused


def test_a_name_the_question_writes_is_not_looked_for() -> None:
    question = "Which bonds does atom TR000_2 have?"
    assert list(unused_columns(question, f"{question} TR000_2 is the atom id", "SELECT 1")) == []


def test_a_long_sql_is_looked_up_quickly() -> None:
    """Thousands of SQL words against a hundred names: lookups, not a scan per name (a scan
    with near-spelling tests took 20 s of CPU here)."""
    sql = "SELECT " + ", ".join(f"col_{i}_x" for i in range(20_000)) + " FROM t"
    enriched = " ".join(f"c{i} refers to name_{i}_y;" for i in range(100))
    start = time.thread_time()
    assert len(list(unused_columns(QUESTION, enriched, sql))) == 100
    assert time.thread_time() - start < 5
