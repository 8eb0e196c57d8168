"""Rows fetched within a size limit as well as a row limit (reference mode's execution)."""

from __future__ import annotations

import sqlite3

import pytest

from stef.sql.fetch import MAX_RESULT_BYTES, MAX_VALUE_BYTES, fetch, limit_values

_ROWS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {count}) "


def test_rows_within_both_limits_come_whole_with_one_past_max_rows() -> None:
    conn = sqlite3.connect(":memory:")
    cursor = conn.execute(_ROWS.format(count=1000) + "SELECT i, 'x' || i FROM n")
    rows = fetch(cursor, 600)
    assert isinstance(rows, list) and len(rows) == 601  # one more than allowed: too many
    assert rows[:2] == [(1, "x1"), (2, "x2")]


def test_rows_past_the_bytes_limit_are_refused_before_all_are_read() -> None:
    conn = sqlite3.connect(":memory:")
    count = MAX_RESULT_BYTES // (512 * 1024) + 8
    cursor = conn.execute(_ROWS.format(count=count) + "SELECT zeroblob(512 * 1024) FROM n")
    said = fetch(cursor, 10_000)
    assert isinstance(said, str) and "MiB" in said


def test_a_value_past_the_value_limit_fails_the_statement() -> None:
    conn = sqlite3.connect(":memory:")
    limit_values(conn)
    assert fetch(conn.execute(f"SELECT zeroblob({MAX_VALUE_BYTES})"), 1) == [
        (bytes(MAX_VALUE_BYTES),)
    ]
    with pytest.raises(sqlite3.DataError):
        fetch(conn.execute(f"SELECT zeroblob({MAX_VALUE_BYTES + 1})"), 1)
