"""Canonical forms of SQL fragments (stef.sql.canonical)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot

from stef.sql import canonical
from stef.sql.canonical import (
    SQL_STRING,
    canon,
    is_literal,
    literal_value,
    norm_ident,
    norm_value,
    values_in,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2023.0", "2023"),
        ("  New   York ", "new york"),
        ("1e3", "1000"),
        ("2.50", "2.5"),
        ("NaN", "nan"),
        ("1e20", "1e+20"),
        ("Q3", "q3"),
    ],
)
def test_norm_value(text: str, value: str) -> None:
    assert norm_value(text) == value


def test_norm_ident() -> None:
    assert norm_ident("  Customer_ID ") == "customer_id"


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ('SELECT "T"."Region" FROM t', "region"),
        ("SELECT STRFTIME('%Y', d) FROM t", "strftime('%Y', d)"),
        ("SELECT SUM(t.Amount)   /  COUNT(*) FROM t", "sum(amount) / count(*)"),
        ("SELECT 'It''s' FROM t", "'It''s'"),
    ],
)
def test_canon_drops_qualifiers_and_quotes_and_keeps_string_case(sql: str, text: str) -> None:
    tree = sqlglot.parse_one(sql)
    assert canon(tree.expressions[0]) == text


def test_canon_folds_strings_when_asked() -> None:
    node = sqlglot.parse_one("SELECT a FROM t WHERE b = 'EMEA'").args["where"].this
    assert canon(node) == "b = 'EMEA'"
    assert canon(node, fold_strings=True) == "b = 'emea'"


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("'Acme'", "acme"),
        ("(42.0)", "42"),
        ("-7", "-7"),
        ("TRUE", "true"),
        ("CAST('2024-01-05' AS DATE)", "2024-01-05"),
        ("DATE '2024-01-05'", "2024-01-05"),
        ("col", None),
        ("1 + 2", None),
    ],
)
def test_literal_value(sql: str, value: str | None) -> None:
    node = sqlglot.parse_one(f"SELECT {sql}").expressions[0]
    assert literal_value(node) == value
    assert is_literal(node) is (value is not None)


def test_null_is_a_literal_without_a_value() -> None:
    node = sqlglot.parse_one("SELECT NULL").expressions[0]
    assert literal_value(node) is None and is_literal(node)


def test_values_in_tree_order() -> None:
    node = sqlglot.parse_one("SELECT a FROM t WHERE b IN ('X', 2.0) AND c = TRUE")
    assert values_in(node.args["where"]) == ["x", "2", "true"]


def test_sql_string_reads_escaped_quotes_as_one_literal() -> None:
    found = [m.group(1) for m in SQL_STRING.finditer("a = 'it''s' AND b = '' AND c = 'x'")]
    assert found == ["it''s", "", "x"]


@pytest.mark.parametrize(
    ("sql", "read"),
    [
        ('SELECT T1."Name" FROM t AS T1', None),
        ('SELECT "select" FROM t', None),  # a keyword: quoted again
        ('SELECT "1a" FROM t', None),  # starts with a digit: quoted again
        ("SELECT cat.db.tbl.col FROM t", None),
        ('SELECT "it\'s" FROM t', None),  # a quote inside: still a name, not a string
        ('SELECT `x y`, `Weird"` FROM t', "mysql"),
        ("SELECT Größe FROM t", None),
    ],
)
def test_a_column_reads_as_its_rendered_text(sql: str, read: str | None) -> None:
    # Columns take a shortcut (one rendering per name): the same text as the whole path.
    for projection in sqlglot.parse_one(sql, read=read).expressions:
        for fold_strings in (False, True):
            assert canon(projection, fold_strings=fold_strings) == canonical._rendered(
                projection, fold_strings
            )


def test_a_long_column_name_is_rendered_each_time_not_kept() -> None:
    # Not even looked up (a full cache would keep its size whatever came in).
    looked_up = _lookups(canonical._column_text)
    name = "c" * 300
    column = sqlglot.parse_one(f"SELECT t.{name} FROM t").expressions[0]
    assert canon(column) == name
    assert _lookups(canonical._column_text) == looked_up
    assert canon(sqlglot.parse_one("SELECT t.short FROM t").expressions[0]) == "short"
    assert _lookups(canonical._column_text) == looked_up + 1


def _lookups(cached: Any) -> int:
    info = cached.cache_info()
    return int(info.hits + info.misses)
