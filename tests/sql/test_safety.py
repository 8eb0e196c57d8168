"""Statement kinds and safety (stef.sql.safety)."""

from __future__ import annotations

import re

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from stef.sql.canonical import SQL_STRING
from stef.sql.safety import _blank, is_mutating, is_statement, scan_unparsed, statement_type


@pytest.mark.parametrize(
    ("sql", "kind", "mutating"),
    [
        ("SELECT 1", "select", False),
        ("SELECT 1 UNION SELECT 2", "select", False),
        ("INSERT INTO t VALUES (1)", "insert", True),
        ("UPDATE t SET a = 1", "update", True),
        ("DELETE FROM t", "delete", True),
        ("DROP TABLE t", "drop", True),
        ("TRUNCATE TABLE t", "truncate", True),
        ("CREATE TABLE t (a INT)", "create", True),
        ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "select", True),
        ("SELECT * INTO backup FROM t", "select", True),
        ("SHOW TABLES", "show", False),
    ],
)
def test_statement_type_and_mutating(sql: str, kind: str, mutating: bool) -> None:
    dialect = "postgres" if "RETURNING" in sql else "mysql" if sql.startswith("SHOW") else None
    stmt = sqlglot.parse_one(sql, read=dialect)
    assert statement_type(stmt) == kind
    assert is_mutating(stmt) is mutating
    assert is_statement(stmt)


def test_a_bare_expression_is_not_a_statement() -> None:
    assert not is_statement(sqlglot.parse_one("1 + 1"))


@pytest.mark.parametrize(
    ("sql", "mutating", "multiple"),
    [
        ("SELEC x FROM (", False, False),
        ("SELEC x; DROP TABLE t", True, True),
        ("SELEC 'drop table t; delete from u' FROM (", False, False),
        ("SELEC x -- ; delete from t\n FROM (", False, False),
        ("SELEC x /* update t set a = 1; */ FROM (", False, False),
        ("update t set a = 1 WHERE (", True, False),
        ("SELEC x;  ;", False, False),
    ],
)
def test_scan_unparsed_ignores_comments_and_strings(
    sql: str, mutating: bool, multiple: bool
) -> None:
    assert scan_unparsed(sql) == (mutating, multiple)


@pytest.mark.parametrize(
    ("sql", "mutating", "multiple"),
    [
        # An unclosed comment stays text, as it always did: what follows it is still read.
        ("SELEC 1 /* ; DROP TABLE t", True, True),
        ("SELEC 1 /* a */ x /* ; delete from t", True, True),
        ("SELEC 1 /* a */ ; /* b */", False, False),
        ("SELEC '/*' ; x */ drop table t", True, True),
        ("SELEC 1 /*/ drop table t", True, False),
    ],
)
def test_scan_unparsed_leaves_an_unclosed_comment_as_text(
    sql: str, mutating: bool, multiple: bool
) -> None:
    assert scan_unparsed(sql) == (mutating, multiple)


# The single regex _blank replaced: quadratic on unclosed openers, the reference for its output.
_LAZY_BLOCK_COMMENT = re.compile(
    r"--[^\n]*|/\*.*?\*/|" + SQL_STRING.pattern + r"|\"(?:[^\"]|\"\")*\"|`[^`]*`", re.S
)
_PIECES = ["/*", "*/", "/", "*", "--", "\n", "'", "''", '"', "`", ";", " ", "x", "drop table t"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_blank_matches_the_lazy_regex(sql: str) -> None:
    assert _blank(sql) == _LAZY_BLOCK_COMMENT.sub(" ", sql)
