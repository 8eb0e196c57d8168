"""The census's one walk finds what the separate walks it replaced found, in the same order."""

from __future__ import annotations

import json

import pytest
import sqlglot
from sqlglot import exp

from stef.sql.census import Census
from stef.sql.safety import MUTATING
from stef.sql.scope import conditions
from tests.conftest import ROOT

_HANDWRITTEN = [
    "SELECT a FROM t",
    "WITH c AS (SELECT a, COUNT(*) AS n FROM t GROUP BY a) SELECT * FROM c WHERE n > 1",
    "SELECT a, SUM(b) OVER (PARTITION BY a), MAX(c) FROM t JOIN u ON t.id = u.id AND u.k = 1",
    "SELECT a FROM t WHERE b IN (SELECT b FROM u WHERE c = (SELECT MAX(c) FROM v))",
    "SELECT a FROM (SELECT a, AVG(x) FROM t GROUP BY a) AS s UNION SELECT a FROM w",
    "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u JOIN v ON u.x = v.x AND v.y = 'z')",
    "WITH d AS (DELETE FROM t RETURNING *) SELECT COUNT(*) FROM d",
    "SELECT COUNT(DISTINCT a), UPPER(b) FROM t HAVING COUNT(*) > (SELECT 1)",
    "SELECT x FROM t QUALIFY ROW_NUMBER() OVER (ORDER BY y) = 1",
    "INSERT INTO t SELECT a FROM u WHERE b = 1",
]


def _example_sql() -> list[str]:
    lines = (ROOT / "examples" / "agent_log.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        sql = record.get("sql") if isinstance(record, dict) else None
        if isinstance(sql, str) and len(sql) < 5000:
            out.append(sql)
    return out


def _trees() -> list[exp.Expr]:
    trees = []
    for sql in [*_HANDWRITTEN, *_example_sql()]:
        try:
            parsed = sqlglot.parse(sql, read="postgres" if "RETURNING" in sql else None)
        except (sqlglot.errors.SqlglotError, ValueError, RecursionError):
            continue
        trees += [t for t in parsed if t is not None]
    return trees


def _own_aggregates(root: exp.Expr) -> dict[int, list[exp.AggFunc]]:
    """The aggregates each SELECT computes itself, read by climbing from each aggregate."""
    out: dict[int, list[exp.AggFunc]] = {}
    for agg in root.find_all(exp.AggFunc):
        if agg.find_ancestor(exp.Window) is None:
            select = agg.find_ancestor(exp.Select)
            if select is not None:
                out.setdefault(id(select), []).append(agg)
    return out


@pytest.mark.parametrize("tree", _trees(), ids=lambda t: t.sql()[:60])
def test_the_census_agrees_with_separate_walks(tree: exp.Expr) -> None:
    census = Census.of(tree)
    assert census.selects == list(tree.find_all(exp.Select))
    assert census.tables == list(tree.find_all(exp.Table))
    assert census.ctes == list(tree.find_all(exp.CTE))
    assert census.functions == [
        f for f in tree.find_all(exp.Func) if not isinstance(f, exp.Connector | exp.Binary)
    ]
    assert census.aggregates == _own_aggregates(tree)
    assert census.conditions == conditions(tree)
    assert census.has_window == (tree.find(exp.Window) is not None)
    assert census.has_set_operation == (tree.find(exp.SetOperation) is not None)
    assert census.has_subquery_node == (tree.find(exp.Subquery) is not None)
    assert census.has_write == any(isinstance(n, MUTATING) for n in tree.walk())


def test_the_census_reads_conditions_below_the_root() -> None:
    tree = sqlglot.parse_one("SELECT a FROM t WHERE b IN (SELECT c FROM u WHERE d = 1)")
    inner = [s for s in Census.of(tree).selects if s is not tree]
    assert len(inner) == 1
    assert Census.of(tree).conditions.inside_predicate(inner[0])
    assert Census.of(tree).conditions.under_clause(inner[0])


def test_the_census_drops_text_positions_and_keeps_other_metadata() -> None:
    tree = sqlglot.parse_one("SELECT a, 'x' FROM t WHERE b = 1")
    assert any(n.meta.get("line") is not None for n in tree.walk())
    literal = tree.find(exp.Literal)
    assert literal is not None
    literal.meta["inline"] = True
    Census.of(tree)
    assert not any(set(n.meta) & {"line", "col", "start", "end"} for n in tree.walk())
    assert literal.meta == {"inline": True}
