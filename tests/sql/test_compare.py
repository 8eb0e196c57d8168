"""Structural comparison with a reference SQL: equivalent rewrites compare equal, real
differences are named by component, formatting never matters."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from stef.calibrate.labels import reformat_sql
from stef.sql import compare as compare_module
from stef.sql import equivalences
from stef.sql.compare import Parts, compare, keyed_grouping, parts_of
from stef.sql.equivalences import rewritten

_KEYWORD = re.compile(r"\b(SELECT|FROM|WHERE|JOIN|ON|AND|OR|GROUP BY|ORDER BY|LIMIT|AS)\b")
# (title, generated, reference): the same query written another way.
EQUIVALENT = [
    ("table aliases", "SELECT T1.name FROM singer AS T1 WHERE T1.age > 30",
     "SELECT singer.name FROM singer WHERE age > 30"),
    ("join order and ON sides", "SELECT a.x FROM a JOIN b ON a.id = b.aid WHERE b.k = 1",
     "SELECT a.x FROM b JOIN a ON b.aid = a.id WHERE b.k = 1"),
    ("inner join filter in ON or WHERE", "SELECT a.x FROM a JOIN b ON a.id = b.aid AND b.k = 1",
     "SELECT a.x FROM a JOIN b ON a.id = b.aid WHERE b.k = 1"),
    ("commuted comparison", "SELECT x FROM t WHERE 5 < y", "SELECT x FROM t WHERE y > 5"),
    ("IN versus OR", "SELECT x FROM t WHERE c IN ('a', 'b')",
     "SELECT x FROM t WHERE c = 'b' OR c = 'a'"),
    ("BETWEEN versus two comparisons", "SELECT x FROM t WHERE y BETWEEN 1 AND 9",
     "SELECT x FROM t WHERE y >= 1 AND y <= 9"),
    ("literal types", "SELECT x FROM t WHERE y = '2010'", "SELECT x FROM t WHERE y = 2010"),
    ("projection order and aliases", "SELECT b AS bee, a FROM t", "SELECT a, b FROM t"),
    ("CTE versus subquery", "WITH s AS (SELECT a, b FROM t WHERE c = 1) SELECT a FROM s",
     "SELECT a FROM (SELECT a, b FROM t WHERE c = 1) AS s"),
    ("semi-join versus join", "SELECT name FROM a WHERE id IN (SELECT aid FROM b WHERE k = 2)",
     "SELECT a.name FROM a JOIN b ON a.id = b.aid WHERE b.k = 2"),
    ("extreme versus ORDER BY LIMIT 1", "SELECT name FROM t WHERE v = (SELECT MAX(v) FROM t)",
     "SELECT name FROM t ORDER BY v DESC LIMIT 1"),
    ("conditional count", "SELECT SUM(CASE WHEN g = 'f' THEN 1 ELSE 0 END) FROM t",
     "SELECT COUNT(CASE WHEN g = 'f' THEN id END) FROM t"),
    ("ORDER BY nobody asked for", "SELECT a FROM t ORDER BY a", "SELECT a FROM t"),
    ("UNION branches in another order",
     "SELECT name FROM singer WHERE age > 30 UNION SELECT name FROM actor",
     "SELECT name FROM actor UNION SELECT name FROM singer WHERE 30 < age"),
    ("a chain of UNION ALL in another order, its ORDER BY and LIMIT kept",
     "SELECT a FROM x UNION ALL SELECT a FROM y UNION ALL SELECT a FROM z ORDER BY a LIMIT 3",
     "SELECT a FROM z UNION ALL SELECT a FROM x UNION ALL SELECT a FROM y ORDER BY a LIMIT 3"),
    ("INTERSECT branches in another order, inside a subquery",
     "SELECT n FROM t WHERE id IN (SELECT id FROM a INTERSECT SELECT id FROM b)",
     "SELECT n FROM t WHERE id IN (SELECT id FROM b INTERSECT SELECT id FROM a)"),
    ("a UNION ALL under a UNION reads as a UNION",
     "SELECT a FROM t UNION ALL SELECT a FROM s UNION SELECT a FROM u",
     "SELECT a FROM u UNION SELECT a FROM s UNION SELECT a FROM t"),
    ("a set operation ordered by the first column, whichever branch comes first",
     "SELECT a, b FROM t UNION SELECT b, a FROM s EXCEPT SELECT 0, 0 ORDER BY 1 LIMIT 3",
     "SELECT b, a FROM s UNION SELECT a, b FROM t EXCEPT SELECT 0, 0 ORDER BY 1 LIMIT 3"),
    ("UNION branches in another order, in a CTE",
     "WITH n AS (SELECT a FROM x UNION SELECT a FROM y) SELECT COUNT(*) FROM n",
     "WITH n AS (SELECT a FROM y UNION SELECT a FROM x) SELECT COUNT(*) FROM n"),
]  # fmt: skip

# (title, generated, reference, the differing component)
DIFFERENT = [
    ("filter value", "SELECT x FROM t WHERE c = 'Germany'", "SELECT x FROM t WHERE c = 'France'",
     "filters"),
    ("string case is a value", "SELECT x FROM t WHERE e = 'H'", "SELECT x FROM t WHERE e = 'h'",
     "filters"),
    ("missing filter", "SELECT x FROM t", "SELECT x FROM t WHERE c = 1", "filters"),
    ("other table", "SELECT COUNT(*) FROM singer", "SELECT COUNT(*) FROM concert", "tables"),
    ("other join key", "SELECT a.x FROM a JOIN b ON a.id = b.id",
     "SELECT a.x FROM a JOIN b ON a.id = b.aid", "joins"),
    ("other projection", "SELECT name FROM t", "SELECT id FROM t", "projections"),
    ("count distinct", "SELECT COUNT(id) FROM t", "SELECT COUNT(DISTINCT id) FROM t",
     "aggregates"),
    ("direction of a top-1", "SELECT a FROM t ORDER BY v LIMIT 1",
     "SELECT a FROM t ORDER BY v DESC LIMIT 1", "order_by"),
    ("limit", "SELECT a FROM t ORDER BY v DESC LIMIT 3",
     "SELECT a FROM t ORDER BY v DESC LIMIT 5", "limit"),
    ("grouping", "SELECT c, COUNT(*) FROM t GROUP BY c, d", "SELECT c, COUNT(*) FROM t GROUP BY c",
     "group_by"),
    ("having", "SELECT c FROM t GROUP BY c HAVING COUNT(*) > 2",
     "SELECT c FROM t GROUP BY c HAVING COUNT(*) > 5", "having"),
    ("distinct", "SELECT DISTINCT c FROM t", "SELECT c FROM t", "distinct"),
    ("set operation", "SELECT a FROM t UNION SELECT a FROM u", "SELECT a FROM t", "shape"),
    ("EXCEPT branches in another order", "SELECT a FROM t EXCEPT SELECT a FROM u",
     "SELECT a FROM u EXCEPT SELECT a FROM t", "subqueries"),
    ("UNION against UNION ALL", "SELECT a FROM t UNION SELECT a FROM u",
     "SELECT a FROM u UNION ALL SELECT a FROM t", "shape"),
    ("a UNION branch's own LIMIT", "SELECT a FROM t UNION (SELECT a FROM u LIMIT 1)",
     "(SELECT a FROM t LIMIT 1) UNION SELECT a FROM u", "subqueries"),
    ("a UNION's LIMIT", "SELECT a FROM t UNION SELECT a FROM s LIMIT 2",
     "SELECT a FROM s UNION SELECT a FROM t", "limit"),
    ("a UNION's OFFSET", "SELECT a FROM t UNION SELECT a FROM s ORDER BY a LIMIT 1 OFFSET 1",
     "SELECT a FROM s UNION SELECT a FROM t ORDER BY a LIMIT 1 OFFSET 2", "limit"),
    ("a UNION's order", "SELECT a FROM t UNION SELECT a FROM s ORDER BY a LIMIT 1",
     "SELECT a FROM s UNION SELECT a FROM t ORDER BY a DESC LIMIT 1", "order_by"),
    ("a UNION ordered by another column's position",
     "SELECT a, b FROM t UNION SELECT a, b FROM s ORDER BY 2 LIMIT 1",
     "SELECT a, b FROM s UNION SELECT a, b FROM t ORDER BY 1 LIMIT 1", "order_by"),
    ("a UNION ordered by a name each first branch gives another column",
     "SELECT a AS y, b FROM t UNION SELECT a, b FROM s ORDER BY y LIMIT 1",
     "SELECT a, b AS y FROM t UNION SELECT a, b FROM s ORDER BY y LIMIT 1", "order_by"),
    ("columns of a UNION in another order",
     "SELECT a, b FROM t UNION SELECT a, c FROM s",
     "SELECT a, c FROM s UNION SELECT b, a FROM t", "projections"),
    ("which set operation nests in which",
     "SELECT a FROM t UNION SELECT a FROM s UNION ALL SELECT a FROM u",
     "SELECT a FROM t UNION ALL SELECT a FROM s UNION SELECT a FROM u", "shape"),
    ("EXCEPT branches in another order, in a CTE",
     "WITH n AS (SELECT a FROM t EXCEPT SELECT a FROM s) SELECT a FROM n",
     "WITH n AS (SELECT a FROM s EXCEPT SELECT a FROM t) SELECT a FROM n", "subqueries"),
    ("EXCEPT branches in another order, under a UNION",
     "SELECT a FROM t EXCEPT SELECT a FROM s UNION ALL SELECT a FROM u",
     "SELECT a FROM s EXCEPT SELECT a FROM t UNION ALL SELECT a FROM u", "subqueries"),
    ("UNION ALL cut without an order keeps its branches' order",
     "SELECT a FROM t UNION ALL SELECT a FROM s LIMIT 2",
     "SELECT a FROM s UNION ALL SELECT a FROM t LIMIT 2", "subqueries"),
]  # fmt: skip


# (title, generated, reference): set operations that differ, whichever component says so.
NOT_EQUIVALENT = [
    ("an ORDER BY name read against the first branch as written",
     "SELECT a, b FROM t UNION SELECT b, a FROM s EXCEPT SELECT 0, 0 ORDER BY 1 LIMIT 3",
     "SELECT b, a FROM s UNION SELECT a, b FROM t EXCEPT SELECT 0, 0 ORDER BY 2 LIMIT 3"),
    ("which branches a UNION combines under a UNION ALL",
     "SELECT a FROM t UNION SELECT a FROM u UNION ALL SELECT a FROM s UNION ALL SELECT a FROM v",
     "SELECT a FROM t UNION SELECT a FROM v UNION ALL SELECT a FROM s UNION ALL SELECT a FROM u"),
    ("which branches a UNION combines under an INTERSECT",
     "SELECT a FROM t UNION SELECT a FROM s UNION SELECT a FROM u INTERSECT SELECT a FROM v",
     "SELECT a FROM t UNION SELECT a FROM s UNION SELECT a FROM v INTERSECT SELECT a FROM u"),
    ("columns in another order in a branch that is not the first",
     "SELECT a, b FROM t INTERSECT SELECT a, b FROM s",
     "SELECT b, a FROM t INTERSECT SELECT a, b FROM s"),
    ("UNIONs in derived tables on either side of an EXCEPT",
     "SELECT * FROM (SELECT a FROM t WHERE a < 2 UNION SELECT a FROM t WHERE a = 2) "
     "EXCEPT SELECT * FROM (SELECT a FROM t WHERE a > 2 UNION SELECT a FROM t WHERE a <> 2)",
     "SELECT * FROM (SELECT a FROM t WHERE a > 2 UNION SELECT a FROM t WHERE a <> 2) "
     "EXCEPT SELECT * FROM (SELECT a FROM t WHERE a < 2 UNION SELECT a FROM t WHERE a = 2)"),
    ("an ORDER BY name only a later branch gives (SQLite reads it there)",
     "SELECT a AS p, b AS q FROM t UNION SELECT a AS y, b AS r FROM u "
     "UNION SELECT a AS s, b AS y FROM v ORDER BY y LIMIT 2",
     "SELECT a AS p, b AS q FROM t UNION SELECT a AS s, b AS y FROM v "
     "UNION SELECT a AS y, b AS r FROM u ORDER BY y LIMIT 2"),
    ("an ORDER BY expression a branch projects",
     "SELECT a + 1, b FROM t UNION SELECT b, a + 1 FROM u ORDER BY a + 1 LIMIT 3",
     "SELECT b, a + 1 FROM u UNION SELECT a + 1, b FROM t ORDER BY a + 1 LIMIT 3"),
    ("which branches a UNION combines, past the read budget",
     "SELECT a FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM t "
     "UNION SELECT a FROM u UNION ALL SELECT a FROM s) UNION ALL SELECT 500) UNION ALL SELECT 501) "
     "UNION ALL SELECT 502) UNION ALL SELECT 503) UNION ALL SELECT 504",
     "SELECT a FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM t "
     "UNION SELECT a FROM s UNION ALL SELECT a FROM u) UNION ALL SELECT 500) UNION ALL SELECT 501) "
     "UNION ALL SELECT 502) UNION ALL SELECT 503) UNION ALL SELECT 504"),
    ("a UNION ALL read under a LIMIT without an ORDER BY",
     "SELECT * FROM (SELECT a FROM t UNION ALL SELECT a FROM s) LIMIT 2",
     "SELECT * FROM (SELECT a FROM s UNION ALL SELECT a FROM t) LIMIT 2"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("title", "generated", "gold"), NOT_EQUIVALENT, ids=[c[0] for c in NOT_EQUIVALENT]
)
def test_set_operations_that_differ_are_told_apart(title: str, generated: str, gold: str) -> None:
    for ordered in (False, True):
        found = compare(generated, gold, "sqlite", ordered=ordered)
        assert found.error is None and not found.equivalent


def test_distinct_on_is_compared_by_its_expressions() -> None:
    # One row per a against one row per b: other rows, not fewer repeats (it compared equal).
    other = compare(
        "SELECT DISTINCT ON (a) a, b FROM t", "SELECT DISTINCT ON (b) a, b FROM t", "postgres"
    )
    assert [d.component for d in other.differences] == ["distinct"] and not other.minor_only
    same = compare(
        "SELECT DISTINCT ON (a, b) a, b FROM t", "SELECT DISTINCT ON (b, a) a, b FROM t", "postgres"
    )
    assert same.equivalent, same.differences
    # A plain DISTINCT stays a minor difference (duplicates only).
    assert compare("SELECT DISTINCT a FROM t", "SELECT a FROM t", "postgres").minor_only


def test_a_select_star_ordered_by_position_is_compared_without_the_optimizer() -> None:
    # sqlglot's qualify asserts on SELECT * ... ORDER BY 1: an AssertionError escaped compare.
    found = compare("SELECT * FROM t ORDER BY 1", "SELECT * FROM t GROUP BY 1", "sqlite")
    assert found.error is None and not found.equivalent


def test_a_union_in_bare_parentheses_is_one_chain_with_the_union_holding_it() -> None:
    found = compare(
        "SELECT a FROM t UNION (SELECT a FROM s UNION SELECT a FROM u)",
        "SELECT a FROM u UNION SELECT a FROM t UNION SELECT a FROM s",
        "sqlite",
    )
    assert found.equivalent, found.differences
    # EXCEPT is no chain: A EXCEPT (B EXCEPT C) is not (A EXCEPT B) EXCEPT C.
    assert not compare(
        "SELECT a FROM t EXCEPT (SELECT a FROM s EXCEPT SELECT a FROM u)",
        "SELECT a FROM t EXCEPT SELECT a FROM s EXCEPT SELECT a FROM u",
        "sqlite",
    ).equivalent


@pytest.mark.parametrize(("title", "generated", "gold"), EQUIVALENT, ids=[c[0] for c in EQUIVALENT])
def test_equivalent_rewrites_compare_equal(title: str, generated: str, gold: str) -> None:
    found = compare(generated, gold, "sqlite")
    assert found.equivalent, found.differences


@pytest.mark.parametrize(
    ("title", "generated", "gold", "component"), DIFFERENT, ids=[c[0] for c in DIFFERENT]
)
def test_differences_are_named_by_component(
    title: str, generated: str, gold: str, component: str
) -> None:
    found = compare(generated, gold, "sqlite")
    assert component in [d.component for d in found.differences]


def test_order_counts_when_the_question_asks_for_it() -> None:
    assert compare("SELECT a FROM t", "SELECT a FROM t ORDER BY a", ordered=False).equivalent
    found = compare("SELECT a FROM t", "SELECT a FROM t ORDER BY a", ordered=True)
    assert [d.component for d in found.differences] == ["order_by"]


def test_minor_differences_are_duplicates_and_null_guards_only() -> None:
    found = compare("SELECT DISTINCT a FROM t WHERE a IS NOT NULL", "SELECT a FROM t")
    assert {d.component for d in found.differences} == {"distinct", "null_checks"}
    assert found.minor_only
    assert not compare("SELECT b FROM t", "SELECT a FROM t").minor_only


@pytest.mark.parametrize(
    ("generated", "gold"),
    [(g, r) for _, g, r in EQUIVALENT] + [(g, r) for _, g, r, _ in DIFFERENT],
)
def test_formatting_never_changes_the_comparison(generated: str, gold: str) -> None:
    as_logged = compare(generated, gold, "sqlite")
    # Keywords in lower case, one clause a line: how another generator writes the same query.
    lower = compare(_KEYWORD.sub(lambda m: "\n" + m.group().lower(), generated), gold, "sqlite")
    pretty = compare(reformat_sql(generated, "sqlite"), gold, "sqlite")
    assert as_logged.differences == lower.differences == pretty.differences


def test_unparsable_sql_is_an_outcome_not_an_exception() -> None:
    assert compare("SELECT FROM WHERE ((", "SELECT 1").error == "generated_unparsed"
    assert compare("SELECT 1", "SELEC nothing ((").error == "reference_unparsed"
    assert compare("SELECT 1; SELECT 2", "SELECT 1").error == "generated_unparsed"


@pytest.mark.parametrize(
    ("generated", "reference", "keyed"),
    [
        # the key added to the name, the key in the name's place, either way round, the join's
        # other side of the key
        ("GROUP BY u.id, u.name", "GROUP BY u.name", True),
        ("GROUP BY u.name", "GROUP BY u.id, u.name", True),
        ("GROUP BY u.user_id", "GROUP BY u.name", True),
        ("GROUP BY p.user_id, u.name", "GROUP BY u.name", True),
        # another attribute, two columns in the key's place, a GROUP BY on one side only, an
        # expression, another table's key, a column that only ends in "id"
        ("GROUP BY u.id, u.city", "GROUP BY u.city", False),
        ("GROUP BY u.id", "GROUP BY u.name, u.city", False),
        ("GROUP BY u.city", "GROUP BY u.name", False),
        ("", "GROUP BY u.name", False),
        ("GROUP BY u.id", "GROUP BY UPPER(u.name)", False),
        ("GROUP BY p.id", "GROUP BY u.name", False),
        ("GROUP BY u.paid", "GROUP BY u.name", False),
    ],
)
def test_keyed_grouping(generated: str, reference: str, keyed: bool) -> None:
    def parts(group: str) -> Parts:
        sql = "SELECT u.name, COUNT(*) FROM users AS u JOIN posts AS p ON p.user_id = u.user_id"
        found = parts_of(f"{sql} {group} ORDER BY COUNT(*) DESC LIMIT 1", "sqlite")
        assert found is not None
        return found

    assert keyed_grouping(parts(generated), parts(reference)) is keyed
    assert keyed_grouping(parts(reference), parts(generated)) is keyed


def test_grouping_by_a_key_over_one_table_is_not_keyed_grouping() -> None:
    # Groups of one row each: what a question about names asks is lost.
    gen = parts_of("SELECT name FROM customers GROUP BY id HAVING COUNT(*) > 1", "sqlite")
    ref = parts_of("SELECT name FROM customers GROUP BY name HAVING COUNT(*) > 1", "sqlite")
    assert gen is not None and ref is not None
    assert not keyed_grouping(gen, ref)


def test_numbers_are_spelled_one_way_in_place() -> None:
    # Replacing an item of a list re-parents the whole list (sqlglot): an IN list of 3,900
    # numbers took 2 s of replacements. The literals keep their nodes and change their text.
    tree = sqlglot.parse_one("SELECT a FROM t WHERE a IN (1.0, 2, 3e1, 4.5)", read="sqlite")
    before = list(tree.find_all(exp.Literal))
    _, select = rewritten(tree, "sqlite")
    after = list(select.find_all(exp.Literal))
    assert [id(node) for node in after] == [id(node) for node in before]
    assert [node.this for node in after] == ["1", "2", "30", "4.5"]
    assert compare(
        "SELECT a FROM t WHERE a IN (1.0, 2, 3e1)", "SELECT a FROM t WHERE a IN (1, 2.0, 30)"
    ).equivalent


def test_the_join_equalities_are_read_once_for_the_bridges(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read again for each joined table: a query of 600 joins took 2.6 s.
    calls: list[int] = []
    real = equivalences._all_equalities
    monkeypatch.setattr(
        equivalences, "_all_equalities", lambda select: calls.append(1) or real(select)
    )
    joins = " ".join(f"JOIN t{i} ON t{i}.k{i} = t{i - 1}.k{i} AND t{i}.v > 1" for i in range(1, 6))
    tree = sqlglot.parse_one(f"SELECT t0.a FROM t0 {joins}", read="sqlite")
    _, select = rewritten(tree, "sqlite")
    assert len(select.args["joins"]) == 5
    assert len(calls) == 1


def _keyed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size (nodes) of each query :func:`_subquery_key` is asked for, as it is asked."""
    sizes: list[int] = []
    subquery_key = compare_module._subquery_key

    def counted(select: exp.Select, *args: Any) -> str:
        sizes.append(sum(1 for _ in select.walk()))
        return subquery_key(select, *args)

    monkeypatch.setattr(compare_module, "_subquery_key", counted)
    return sizes


def _nested(nesting: str, levels: int) -> str:
    q = "SELECT a FROM t"
    for k in range(levels):
        q = "SELECT a " + nesting.format(q=q, k=k)
    return q


def test_nested_unions_are_not_sorted_again_inside_each_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each nested query was sorted again inside every query above it: 14 levels cost 12 s.
    keyed = _keyed(monkeypatch)
    assert parts_of(_nested("FROM ({q} UNION SELECT a FROM s{k}) AS d{k}", 14), "sqlite")
    assert len(keyed) <= 2 * 2 * 15  # each SELECT's key at most twice (sort and subqueries)


@pytest.mark.parametrize(
    "nesting",
    [
        "FROM s{k} WHERE a IN ({q} UNION SELECT a FROM u{k})",
        "FROM s{k} WHERE a IN ({q} INTERSECT SELECT a FROM u{k}) UNION SELECT a FROM v{k}",
    ],
)
def test_branch_keys_read_a_query_nested_in_filters_a_bounded_number_of_times(
    nesting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each branch's key read every level below it again: 60 levels in IN took 4.6 s (0.2 s
    # compared as written); past a bound the branches are compared as written.
    q = _nested(nesting, 40)
    keyed = _keyed(monkeypatch)
    assert parts_of(q, "sqlite") is not None
    assert sum(keyed) <= 6 * sum(1 for _ in sqlglot.parse_one(q, read="sqlite").walk())


def test_an_alternating_chain_reads_each_branch_once() -> None:
    # UNION and UNION ALL in turn: every operation its own chain, each keyed once, not by
    # rendering all below it (2,000 branches took 106 s).
    branches = [f"SELECT a FROM t{i}" for i in range(600)]
    text = branches[0]
    for i, branch in enumerate(branches[1:]):
        text += (" UNION " if i % 2 else " UNION ALL ") + branch
    canon_calls = 0
    canon = compare_module.canon

    def counted(node: exp.Expr, **kw: Any) -> str:
        nonlocal canon_calls
        if isinstance(node, exp.SetOperation):
            canon_calls += 1
        return canon(node, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compare_module, "canon", counted)
        assert parts_of(text, "sqlite") is not None
    assert canon_calls == 0


def test_a_long_union_chain_in_another_order_compares_equal() -> None:
    # 2,000 branches are a chain 2,000 links deep: walked without recursion, each branch's
    # components taken once for the sort and the comparison both.
    branches = [f"SELECT a FROM t{i} WHERE b > {i}" for i in range(2000)]
    found = compare(" UNION ".join(branches), " UNION ".join(reversed(branches)), "sqlite")
    assert found.error is None and found.equivalent, found.differences
