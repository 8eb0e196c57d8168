"""Rows fetched within a size limit as well as a row limit (reference mode's execution)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from stef.sql.fetch import MAX_COLUMNS, MAX_RESULT_BYTES, MAX_VALUE_BYTES, fetch, limit_generated

_ROWS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {count}) "


def test_rows_within_both_limits_come_whole_with_one_past_max_rows() -> None:
    conn = sqlite3.connect(":memory:")
    cursor = conn.execute(_ROWS.format(count=1000) + "SELECT i, 'x' || i FROM n")
    rows = fetch(cursor, 600)
    assert isinstance(rows, list) and len(rows) == 601  # one more than allowed: too many
    assert rows[:2] == [(1, "x1"), (2, "x2")]


class _Counting:
    """A cursor that counts the rows it handed out."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.cursor, self.handed = cursor, 0

    def fetchmany(self, n: int) -> list[Any]:
        got = self.cursor.fetchmany(n)
        self.handed += len(got)
        return got


def test_rows_past_the_bytes_limit_are_refused_a_row_after_it() -> None:
    # Checked a chunk of 256 rows at a time, 256 rows of 1 MiB were held before the check.
    conn = sqlite3.connect(":memory:")
    cursor = _Counting(conn.execute(_ROWS.format(count=100) + "SELECT zeroblob(1 << 20) FROM n"))
    said = fetch(cursor, 10_000)
    assert isinstance(said, str) and "MiB" in said
    assert cursor.handed == (MAX_RESULT_BYTES >> 20) + 1


def test_a_generated_database_refuses_a_long_value_and_a_wide_row() -> None:
    conn = sqlite3.connect(":memory:")
    limit_generated(conn)
    assert fetch(conn.execute(f"SELECT zeroblob({MAX_VALUE_BYTES})"), 1) == [
        (bytes(MAX_VALUE_BYTES),)
    ]
    with pytest.raises(sqlite3.Error):
        fetch(conn.execute(f"SELECT zeroblob({MAX_VALUE_BYTES + 1})"), 1)
    wide = ", ".join(["1"] * (MAX_COLUMNS + 1))
    with pytest.raises(sqlite3.Error):
        fetch(conn.execute(f"SELECT {wide}"), 1)


@pytest.mark.parametrize(
    "select",
    [
        "list(repeat('a', 1000)) FROM range(20000)",  # 20 MB of text in one list
        "{'a': repeat('a', 17000000)}",  # 17 MB of text in a struct
        "MAP {repeat('k', 17000000): 1}",  # in a map's key
        "range(2100000)",  # 2,100,000 numbers: 8 bytes each
    ],
    ids=["list", "struct", "map", "numbers"],
)
def test_duckdb_nested_values_count_what_they_hold(select: str) -> None:
    """Only a row's own strings and blobs were counted: a list, struct or map of any size came
    through whole (a list of 100,000 strings of 1,000 characters passed as 100 MB)."""
    duckdb = pytest.importorskip("duckdb")
    conn = duckdb.connect()
    said = fetch(conn.execute(f"SELECT {select}"), 10, chunk=64)
    assert isinstance(said, str) and "MiB" in said


def test_duckdb_nested_values_within_the_limit_come_whole() -> None:
    duckdb = pytest.importorskip("duckdb")
    conn = duckdb.connect()
    rows = fetch(conn.execute("SELECT [1, 2], {'a': 'x'}, [[repeat('b', 3)]]"), 10, chunk=64)
    assert rows == [([1, 2], {"a": "x"}, [["bbb"]])]
