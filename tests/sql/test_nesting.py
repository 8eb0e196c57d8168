"""The call nesting read from a SQL text (stef.sql.nesting): calls count, groups do not."""

from __future__ import annotations

import pytest

from stef.sql.nesting import call_nesting


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
