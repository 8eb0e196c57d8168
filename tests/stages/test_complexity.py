"""Complexity tiers by BADGER's Algorithm 1, read off the SQL spec."""

from __future__ import annotations

import pytest

from stef.stages.complexity import complexity
from stef.stages.sqlspec import sqlspec


@pytest.mark.parametrize(
    ("sql", "tier"),
    [
        ("SELECT name FROM t WHERE id = 1", "easy"),
        ("SELECT COUNT(*) FROM t", "easy"),
        ("SELECT a, b FROM t WHERE x = 1 AND y = 2", "medium"),
        ("SELECT name FROM t ORDER BY name", "medium"),
        ("SELECT a.x FROM a JOIN b ON a.id = b.id", "medium"),
        ("SELECT a, COUNT(*) FROM t GROUP BY a", "medium"),
        ("SELECT a, b, c, d FROM t WHERE x = 1", "hard"),
        ("SELECT a, b, COUNT(*) FROM t GROUP BY a, b", "hard"),
        ("SELECT a FROM t WHERE id IN (SELECT id FROM u)", "hard"),
        # Algorithm 1's EASY gate does not look at CTEs: a one-column CTE query is easy ...
        ("WITH c AS (SELECT a FROM t) SELECT a FROM c", "easy"),
        # ... but its MEDIUM gate does.
        ("WITH c AS (SELECT a, b FROM t) SELECT a, b FROM c", "hard"),
        ("SELECT a FROM t UNION SELECT a FROM u", "hard"),
        (
            "SELECT a, COUNT(*) FROM t GROUP BY a HAVING COUNT(*) > 1 UNION SELECT a, 1 FROM u",
            "extra_hard",
        ),
        ("WITH c AS (SELECT a FROM t) SELECT a FROM c WHERE a IN (SELECT a FROM u)", "extra_hard"),
    ],
)
def test_tiers(sql: str, tier: str) -> None:
    assert complexity(sqlspec(sql)) == tier


def test_unparsed_has_no_tier() -> None:
    assert complexity(sqlspec("this is not sql at all (")) is None
