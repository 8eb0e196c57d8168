"""Right variants: rewrites that keep the gold's meaning (in SQLite).

Each transform takes a copy of the gold's tree, rewrites it in place and returns what it did (or
None when it does not apply); ``reformatted`` returns its own text, the others are rendered.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from sqlglot import exp

from bench.mutations.golds import DIALECT, Gold
from bench.mutations.sites import (
    MIRROR,
    Pool,
    conjuncts,
    literal_comparisons,
    literal_of,
    set_conjuncts,
    wheres,
)
from bench.mutations.text import Rewrite, recased

_ARITHMETIC: tuple[type[exp.Expr], ...] = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.DPipe,
)
_PARENTHESIZABLE: tuple[type[exp.Expr], ...] = (
    *_ARITHMETIC,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Like,
    exp.In,
    exp.Between,
    exp.And,
    exp.Or,
)


def reformatted(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite:
    return Rewrite("pretty-printed, keywords and functions lower-cased", recased(tree))


def commuted(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    sites = literal_comparisons(tree)
    if not sites:
        return None
    node = rng.choice(sites)
    where = "case" if node.find_ancestor(exp.Case, exp.If) else "where"
    where = "or" if node.find_ancestor(exp.Or) else where
    swapped = MIRROR[type(node)](this=node.expression, expression=node.this)
    before = node.sql(dialect=DIALECT)
    node.replace(swapped)
    return Rewrite(f"{before} -> {swapped.sql(dialect=DIALECT)} (in {where})")


def and_swapped(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    sites = list(tree.find_all(exp.And))
    if not sites:
        return None
    node = rng.choice(sites)
    left, right = node.this, node.expression
    node.set("this", right)
    node.set("expression", left)
    return Rewrite(f"{left.sql(dialect=DIALECT)} <-> {right.sql(dialect=DIALECT)}")


def _wrapped(node: exp.Expr, old: exp.Expr) -> exp.Expr:
    """``node`` in parentheses unless it replaces ``old`` directly under a WHERE or an AND."""
    return node if isinstance(old.parent, exp.Where | exp.And) else exp.Paren(this=node)


def _split(between: exp.Between) -> exp.Expr:
    return exp.And(
        this=exp.GTE(this=between.this.copy(), expression=between.args["low"]),
        expression=exp.LTE(this=between.this.copy(), expression=between.args["high"]),
    )


def _bounds(where: exp.Where, low: type[exp.Expr], high: type[exp.Expr]) -> tuple[int, int] | None:
    """Two conjuncts ``x >= a`` (``low``) and ``x <= b`` (``high``) on the same ``x``."""
    parts = conjuncts(where)
    for i, a in enumerate(parts):
        for j, b in enumerate(parts):
            if (
                isinstance(a, low)
                and isinstance(b, high)
                and literal_of(a.expression) is not None
                and literal_of(b.expression) is not None
                and literal_of(a.this) is None
                and a.this == b.this
            ):
                return i, j
    return None


def between_split(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    betweens = [b for b in tree.find_all(exp.Between) if not b.args.get("symmetric")]
    if betweens:
        node = rng.choice(betweens)
        before = node.sql(dialect=DIALECT)
        node.replace(_wrapped(_split(node), node))
        return Rewrite(f"{before} -> >= AND <=")
    for where in wheres(tree):
        pair = _bounds(where, exp.GTE, exp.LTE)
        if pair is None:
            continue
        parts = conjuncts(where)
        a, b = parts[pair[0]], parts[pair[1]]
        joined = exp.Between(this=a.this, low=a.expression, high=b.expression)
        parts[pair[0]] = joined
        parts.pop(pair[1])
        set_conjuncts(where, parts)
        return Rewrite(f"{a.sql(dialect=DIALECT)} AND {b.sql(dialect=DIALECT)} -> BETWEEN")
    return None


def _day(node: exp.Expr) -> date | None:
    lit = literal_of(node)
    if lit is None or not lit.is_string or len(lit.this) != 10:
        return None
    try:
        return date.fromisoformat(lit.this)
    except ValueError:
        return None


def _closed(where: exp.Where) -> str | None:
    """``d >= a AND d < b`` (dates) -> ``d >= a AND d <= b - 1 day``."""
    pair = _bounds(where, exp.GTE, exp.LT)
    if pair is None:
        return None
    parts = conjuncts(where)
    high = parts[pair[1]]
    end = _day(high.expression)
    if end is None or _day(parts[pair[0]].expression) is None:
        return None
    last = (end - timedelta(days=1)).isoformat()
    parts[pair[1]] = exp.LTE(this=high.this, expression=exp.Literal.string(last))
    set_conjuncts(where, parts)
    return f"< '{end}' -> <= '{last}'"


def _half_open(tree: exp.Expr) -> str | None:
    """``d BETWEEN a AND b`` (dates) -> ``d >= a AND d < b + 1 day``."""
    for node in tree.find_all(exp.Between):
        end = _day(node.args["high"])
        if end is None or _day(node.args["low"]) is None or node.args.get("symmetric"):
            continue
        after = (end + timedelta(days=1)).isoformat()
        split = exp.And(
            this=exp.GTE(this=node.this.copy(), expression=node.args["low"]),
            expression=exp.LT(this=node.this.copy(), expression=exp.Literal.string(after)),
        )
        node.replace(_wrapped(split, node))
        return f"BETWEEN .. AND '{end}' -> >= .. AND < '{after}'"
    return None


def date_range_closed(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    for where in wheres(tree):
        done = _closed(where)
        if done:
            return Rewrite(done)
    done = _half_open(tree)
    return Rewrite(done) if done else None


def parenthesized(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    """An expression put in parentheses: arithmetic first (``SELECT (a + b)``), else a
    condition outside a join's ON, else any."""
    sites = [
        node
        for node in tree.find_all(*_PARENTHESIZABLE)
        if not isinstance(node.parent, exp.Paren | exp.Where)
    ]
    arithmetic = [n for n in sites if isinstance(n, _ARITHMETIC)]
    conditions = [n for n in sites if not n.find_ancestor(exp.Join)]
    choice = arithmetic or conditions or sites
    if not choice:
        return None
    node = rng.choice(choice)
    node.replace(exp.Paren(this=node.copy()))
    return Rewrite(f"({node.sql(dialect=DIALECT)})")
