"""The call nesting read from a SQL text (stef.sql.nesting): calls count, groups do not."""

from __future__ import annotations

import pytest
from sqlglot.errors import ParseError

from stef.sql.dialects import parse_sql
from stef.sql.nesting import call_nesting
from stef.stages.sqlspec import sqlspec


@pytest.mark.parametrize(
    ("sql", "depth"),
    [
        ("SELECT 1", 0),
        ("SELECT f(g(x))", 2),
        ("SELECT f (g (x))", 2),  # a space before the parenthesis is still a call
        ("SELECT CAST(x AS DECIMAL(10, 2))", 2),
        ("SELECT ROUND(CAST(SUM(CASE WHEN x THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(y), 2)", 3),
        # Subqueries, lists and groups add no level.
        ("SELECT a FROM t WHERE b IN (SELECT c FROM u WHERE d IN (1, 2))", 0),
        ("SELECT x FROM t WHERE (a AND (b OR (c)))", 0),
        ("SELECT COUNT(*) FROM (SELECT f(x) FROM t) AS s", 1),
        ("WITH a AS (SELECT f(g(1))) SELECT * FROM a", 2),
        ("SELECT SUM(x) OVER (PARTITION BY f(y)) FROM t", 1),
        # Sibling calls are one level each; stray closing parentheses count as nothing.
        ("SELECT f(1), g(2), h(k(3))", 2),
        ("SELECT 1)) FROM t WHERE f(g(1))", 2),
        ("SELECT " + "DATE(" * 22 + "1" + ")" * 22, 22),
    ],
)
def test_call_nesting(sql: str, depth: int) -> None:
    assert call_nesting(sql) == depth


# What the text count cannot see (a parenthesis in a comment or a string closes nothing for the
# parser) and what depth alone does not bound (sibling chains add up): the parse refuses both
# from its own tokens. Before, each parsed for seconds to minutes (DIV0 17 deep: 46 s, 891 MB).
@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT " + "DATE(-- )\n" * 24 + "1" + ")" * 24, None),
        ("SELECT " + "DATE(/*)*/" * 24 + "1" + ")" * 24, None),
        ("SELECT " + "DATE(')' || " * 20 + "1" + ")" * 20, None),
        ("SELECT " + ", ".join("BINARY(" * 10 + "1" + ")" * 10 for _ in range(12)), "mysql"),
        ("SELECT " + "DIV0(" * 17 + "1" + ")" * 17, "snowflake"),
    ],
    ids=["line-comment", "block-comment", "string", "12-chains-of-10", "div0-17"],
)
def test_the_parse_refuses_calls_it_would_not_survive(sql: str, dialect: str | None) -> None:
    with pytest.raises(ParseError, match="function calls nested"):
        parse_sql(sql, dialect)
    assert not sqlspec(sql, dialect).parsed


def test_real_nesting_parses() -> None:
    cleaned = "x"
    for _ in range(10):  # ten REPLACEs deep: a phone number's cleaning
        cleaned = f"REPLACE({cleaned}, '-', '')"
    sql = f"SELECT ROUND(CAST(SUM(IIF(a > 1, 1, 0)) AS REAL) * 100 / COUNT(b), 2), {cleaned} FROM t"
    assert call_nesting(sql) == 10
    assert len(parse_sql(sql, None)) == 1
    two = "SELECT " + ", ".join("BINARY(" * 10 + "1" + ")" * 10 for _ in range(2))
    assert len(parse_sql(two, "mysql")) == 1  # two chains of the limit's depth: 0.3 s
