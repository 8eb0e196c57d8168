"""Predicate extraction, one kind of condition at a time (stef.sql.predicates)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from stef.sql.predicates import condition_keys, conjuncts, parse_condition, predicate_of


def _parts(text: str, dialect: str | None = None) -> list[exp.Expr]:
    node = parse_condition(text, dialect)
    assert node is not None, text
    return list(conjuncts(node))


def _one(text: str, dialect: str | None = None) -> tuple[str, str, str, list[str], bool]:
    """(lhs, op, rhs, values, wildcard) of the one predicate a condition reads as."""
    parts = _parts(text, dialect)
    assert len(parts) == 1, parts
    p = predicate_of(parts[0], dialect)
    assert p is not None, text
    return p.lhs, p.op, p.rhs, list(p.values), p.wildcard


@pytest.mark.parametrize(
    ("text", "dialect", "expected"),
    [
        ("a = 1", None, ("a", "=", "1", ["1"], False)),
        ("1 < a", None, ("a", ">", "1", ["1"], False)),
        ("'x' = name", None, ("name", "=", "x", ["x"], False)),
        ("a <> 'X '", None, ("a", "!=", "x", ["x"], False)),
        ("a >= 2023.0", None, ("a", ">=", "2023", ["2023"], False)),
        ("a = -5", None, ("a", "=", "-5", ["-5"], False)),
        ("a <=> 1", "mysql", ("a", "=", "1", ["1"], False)),
        ("t.a = t.b", None, ("a", "=", "b", [], False)),
        ("a = b + 1", None, ("a", "=", "b + 1", ["1"], False)),
        ("d = DATE '2024-01-05'", None, ("d", "=", "2024-01-05", ["2024-01-05"], False)),
        ("d = CAST('2024' AS INT)", None, ("d", "=", "2024", ["2024"], False)),
        ("UPPER(name) = 'BOB'", None, ("upper(name)", "=", "bob", ["bob"], False)),
        ("flag = TRUE", None, ("flag", "=", "true", ["true"], False)),
    ],
)
def test_comparisons(text: str, dialect: str | None, expected: tuple[object, ...]) -> None:
    """Literal sides go right (mirroring the operator); values fold; numbers are canonical."""
    assert _one(text, dialect) == expected


def test_a_comparison_across_two_tables_is_a_join_not_a_filter() -> None:
    (part,) = _parts("t.a = u.b")
    assert predicate_of(part) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NOT a = 1", ("a", "!=", "1", ["1"], False)),
        ("NOT (a > 5)", ("a", "<=", "5", ["5"], False)),
        ("NOT NOT a = 1", ("a", "=", "1", ["1"], False)),
        ("NOT is_active", ("not is_active", "expr", "", [], False)),
        ("a NOT IN (1, 2)", ("a", "not in", "1, 2", ["1", "2"], False)),
        ("a NOT BETWEEN 1 AND 2", ("a", "not between", "1 and 2", ["1", "2"], False)),
        ("a IS NOT NULL", ("a", "is not null", "", [], False)),
        (
            "NOT EXISTS (SELECT 1 FROM t)",
            ("expr", "not exists", "exists(select 1 from t)", ["1"], False),
        ),
    ],
)
def test_negations(text: str, expected: tuple[object, ...]) -> None:
    """NOT flips the operator (three-valued: NOT a > 5 is a <= 5); an opaque NOT stays opaque."""
    assert _one(text) == expected


@pytest.mark.parametrize(
    ("text", "dialect", "expected"),
    [
        ("name LIKE 'China'", None, ("name", "=", "china", ["china"], False)),
        ("name LIKE '%Chi  na%'", None, ("name", "like", "%chi na%", ["chi na"], True)),
        ("name NOT LIKE '%x%'", None, ("name", "not like", "%x%", ["x"], True)),
        ("name NOT LIKE 'x'", None, ("name", "!=", "x", ["x"], False)),
        ("name ILIKE '%China%'", "postgres", ("name", "like", "%china%", ["china"], True)),
        ("name LIKE other_col", None, ("name", "like", "other_col", [], False)),
    ],
)
def test_like(text: str, dialect: str | None, expected: tuple[object, ...]) -> None:
    """LIKE without a wildcard is equality; the value is the pattern without its wildcards."""
    assert _one(text, dialect) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a IN ('A')", ("a", "=", "a", ["a"], False)),
        ("a IN (x)", ("a", "=", "x", [], False)),
        ("a IN ('b', 'A ', 3)", ("a", "in", "3, a, b", ["b", "a", "3"], False)),
        ("a IN (1, b)", ("a", "in", "1, b", ["1"], False)),
        ("a IN (SELECT b FROM t WHERE c = 'z')", ("a", "in", "(subquery)", ["z"], False)),
    ],
)
def test_in(text: str, expected: tuple[object, ...]) -> None:
    """One value is equality; a list is sorted (its order does not matter); a subquery is opaque."""
    assert _one(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a BETWEEN 1 AND 2.50", ("a", "between", "1 and 2.5", ["1", "2.5"], False)),
        ("a BETWEEN low AND 5", ("a", "between", "low and 5", ["5"], False)),
        ("a IS NULL", ("a", "is null", "", [], False)),
        ("a IS TRUE", ("a", "=", "true", ["true"], False)),
        (
            "EXISTS (SELECT 1 FROM t WHERE x = 'q')",
            ("expr", "exists", "exists(select 1 from t where x = 'q')", ["1", "q"], False),
        ),
        ("is_active", ("is_active", "expr", "", [], False)),
    ],
)
def test_between_is_exists_and_bare_expressions(text: str, expected: tuple[object, ...]) -> None:
    assert _one(text) == expected


def test_or_groups_stay_whole() -> None:
    """An OR is one predicate; its lhs is the column every branch constrains, else ``expr``."""
    assert _one("a = 1 OR a = 2") == ("a", "or", "a = 1 or a = 2", ["1", "2"], False)
    assert _one("a = 1 OR b LIKE '%X%'") == (
        "expr",
        "or",
        "a = 1 or b like '%x%'",
        ["1", "x"],
        True,
    )


def test_and_inside_an_or_branch_is_one_opaque_predicate() -> None:
    node = parse_condition("a = 1 AND b = 'Z'")
    assert node is not None
    p = predicate_of(node)
    assert p is not None
    assert (p.lhs, p.op, p.rhs, p.values) == ("expr", "and", "a = 1 and b = 'z'", ("1", "z"))


def test_conjuncts_split_and_and_push_not_inward() -> None:
    def keys(text: str) -> list[tuple[str, str, str]]:
        out = []
        for part in _parts(text):
            p = predicate_of(part)
            assert p is not None
            out.append(p.key)
        return out

    assert keys("a = 1 AND (b > 2 AND c IS NULL)") == [
        ("a", "=", "1"),
        ("b", ">", "2"),
        ("c", "is null", ""),
    ]
    # De Morgan: NOT (a OR b) is NOT a AND NOT b; NOT (a AND b) is one OR.
    assert keys("NOT (a = 1 OR b = 2)") == [("a", "!=", "1"), ("b", "!=", "2")]
    assert keys("NOT (a = 1 AND b = 2)") == [("expr", "or", "not a = 1 or not b = 2")]


def test_text_and_columns_keep_the_written_form() -> None:
    (part,) = _parts("T.Name LIKE '%Acme%'")
    p = predicate_of(part)
    assert p is not None
    assert p.text == "T.Name LIKE '%Acme%'"
    assert p.columns == ("name",)
    assert p.clause == "where"


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("Status = 'ACTIVE'", [("status", "=", "active")]),
        (
            "is_deleted = FALSE AND tenant_id IN (1, 2)",
            [("is_deleted", "=", "false"), ("tenant_id", "in", "1, 2")],
        ),
        ("a = b", [("a", "=", "b")]),
        ("", []),
        ("a = 1 LIMIT 5", []),
        ("1 FROM t WHERE a = 1", []),
        ("a = 1 GROUP BY a", []),
        ("(((", []),
    ],
)
def test_condition_keys_of_rules_predicates(text: str, keys: list[tuple[str, str, str]]) -> None:
    """A rules predicate is a bare condition; anything else (a clause, garbage) gives no key."""
    assert condition_keys(text) == keys


# ------------------------------------------------------------------------- long AND / OR chains


def _reference_conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The recursive AND split that conjuncts replaced, kept as the reference for its order."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Not):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Not):
            return _reference_conjuncts(inner.this)
        if isinstance(inner, exp.Or):
            return [
                c
                for d in _reference_disjuncts(inner)
                for c in _reference_conjuncts(exp.Not(this=d.copy()))
            ]
        if isinstance(inner, exp.And):
            parts = [exp.Not(this=c.copy()) for c in _reference_conjuncts(inner)]
            return [exp.or_(*parts, copy=False)]
    if isinstance(node, exp.And):
        return _reference_conjuncts(node.left) + _reference_conjuncts(node.right)
    return [node]


def _reference_disjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        return _reference_disjuncts(node.left) + _reference_disjuncts(node.right)
    return [node]


@pytest.mark.parametrize(
    "text",
    [
        "a = 1 AND b = 2 AND c = 3 AND d = 4",
        "(a = 1 AND (b = 2 AND c = 3)) AND ((d = 4 AND e = 5) AND f = 6)",
        "NOT (a = 1 OR (b = 2 OR NOT (c = 3 OR d = 4))) AND e = 5",
        "NOT NOT (a = 1 AND b = 2) AND NOT (c = 3 AND (d = 4 OR e = 5))",
        "a = 1 OR b = 2 AND (NOT (NOT (c = 3 OR d = 4)) AND f = 6)",
        "((NOT (a = 1 OR b = 2)) AND (NOT NOT NOT (c = 3 AND d = 4)) AND g IS NULL)",
    ],
)
def test_conjuncts_keep_the_order_of_the_recursive_split(text: str) -> None:
    node = parse_condition(text)
    assert node is not None
    assert [c.sql() for c in conjuncts(node)] == [c.sql() for c in _reference_conjuncts(node)]


def test_a_3000_term_and_chain_splits_without_recursion() -> None:
    """A chain of 3000 ANDs is a tree 3000 levels deep: past Python's recursion limit when the
    split recursed, which marked valid SQL unparsed."""
    node = parse_condition(" AND ".join(f"c{i} = {i}" for i in range(3000)))
    assert node is not None
    keys = [p.key for c in conjuncts(node) if (p := predicate_of(c)) is not None]
    assert keys == [(f"c{i}", "=", str(i)) for i in range(3000)]


def test_a_negated_3000_term_or_chain_splits_into_3000_negations() -> None:
    node = parse_condition("NOT (" + " OR ".join(f"c{i} = {i}" for i in range(3000)) + ")")
    assert node is not None
    keys = [p.key for c in conjuncts(node) if (p := predicate_of(c)) is not None]
    assert keys == [(f"c{i}", "!=", str(i)) for i in range(3000)]


def test_a_3000_term_or_chain_is_one_predicate_with_every_value() -> None:
    node = parse_condition(" OR ".join(f"c = {i}" for i in range(3000)))
    assert node is not None
    (part,) = conjuncts(node)
    p = predicate_of(part)
    assert p is not None
    assert (p.lhs, p.op) == ("c", "or")
    assert p.values == tuple(str(i) for i in range(3000))
