"""What the transforms look for in a tree: comparisons with a literal, WHERE conjuncts, the
values compared with each column across the golds, and the question's cue words."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from bench.mutations.golds import Gold, parse

COMPARISONS: tuple[type[exp.Expr], ...] = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
ORDERINGS: tuple[type[exp.Expr], ...] = (exp.GT, exp.GTE, exp.LT, exp.LTE)
MIRROR: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.GTE: exp.LTE,
    exp.LTE: exp.GTE,
}
PREDICATES: tuple[type[exp.Expr], ...] = (*COMPARISONS, exp.Between, exp.In, exp.Like)

# A question that asks for an order of rank: ORDER BY direction and LIMIT carry its meaning.
RANKING = re.compile(
    r"\b(top|most|least|highest|lowest|largest|smallest|biggest|greatest|fewest|best|worst"
    r"|first|last|oldest|newest|youngest|earliest|latest|maximum|minimum|max|min|longest"
    r"|shortest|ranked|rank)\b"
)
# The words that name each aggregate.
AGGREGATE_WORDS: dict[type[exp.Expr], re.Pattern[str]] = {
    exp.Max: re.compile(
        r"\b(max|maximum|highest|largest|greatest|biggest|most|longest|latest|top)\b"
    ),
    exp.Min: re.compile(r"\b(min|minimum|lowest|smallest|least|fewest|shortest|earliest)\b"),
    exp.Sum: re.compile(r"\b(sum|total|totals|summed)\b"),
    exp.Avg: re.compile(r"\b(avg|average|averages|mean)\b"),
}


def literal_of(node: exp.Expr) -> exp.Literal | None:
    """The literal a comparison operand is (through a minus sign or parentheses), or None."""
    while isinstance(node, exp.Neg | exp.Paren):
        node = node.this
    return node if isinstance(node, exp.Literal) else None


def in_predicate(lit: exp.Literal) -> bool:
    """Whether the literal is an operand of a comparison, BETWEEN, IN or LIKE."""
    node: exp.Expr | None = lit.parent
    while isinstance(node, exp.Neg | exp.Paren | exp.Tuple):
        node = node.parent
    return isinstance(node, PREDICATES)


def literal_comparisons(tree: exp.Expr) -> list[exp.Expr]:
    """Comparisons with a literal on exactly one side, in tree order."""
    out: list[exp.Expr] = []
    for node in tree.find_all(*COMPARISONS):
        sides = [literal_of(node.this), literal_of(node.expression)]
        if sum(s is not None for s in sides) == 1:
            out.append(node)
    return out


def the_literal(node: exp.Expr) -> exp.Literal:
    """The literal side of a comparison from :func:`literal_comparisons`."""
    lit = literal_of(node.this) or literal_of(node.expression)
    assert lit is not None
    return lit


def conjuncts(where: exp.Where) -> list[exp.Expr]:
    """The AND-conjuncts of a WHERE clause (through one pair of parentheses around all)."""
    cond = where.this
    if isinstance(cond, exp.Paren) and isinstance(cond.this, exp.And):
        cond = cond.this
    return list(cond.flatten()) if isinstance(cond, exp.And) else [cond]


def set_conjuncts(where: exp.Where, parts: Sequence[exp.Expr]) -> None:
    """Replace a WHERE's condition by the AND of ``parts``; no parts removes the WHERE."""
    if not parts:
        where.pop()
        return
    cond: exp.Expr = parts[0]
    for part in parts[1:]:
        cond = exp.And(this=cond, expression=part)
    where.set("this", cond)


def wheres(tree: exp.Expr) -> Iterator[exp.Where]:
    yield from tree.find_all(exp.Where)


def column_key(node: exp.Expr) -> str | None:
    """The column a predicate compares (its name, lower-cased), or None."""
    target = node.this if isinstance(node, exp.In | exp.Like | exp.Between) else None
    if target is None:
        sides = [node.this, node.expression]
        target = next((s for s in sides if literal_of(s) is None), None)
    return target.name.lower() if isinstance(target, exp.Column) else None


@dataclass
class Pool:
    """The string values compared with each column across the golds: where a replaced value
    comes from (a value of the same column, so the replacement is a plausible one)."""

    by_db: dict[tuple[str | None, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    by_column: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, db: str | None, column: str, value: str) -> None:
        self.by_db[(db, column)].add(value)
        self.by_column[column].add(value)

    def values(self, db: str | None, column: str) -> list[list[str]]:
        """The candidates, the same database's first; each list sorted (deterministic)."""
        return [sorted(self.by_db.get((db, column), ())), sorted(self.by_column.get(column, ()))]


def build_pool(golds: Iterable[Gold]) -> Pool:
    pool = Pool()
    for gold in golds:
        tree = parse(gold.gold_sql)
        if tree is None:
            continue
        for lit in tree.find_all(exp.Literal):
            if not lit.is_string or not in_predicate(lit):
                continue
            pred = lit.parent
            while pred is not None and not isinstance(pred, PREDICATES):
                pred = pred.parent
            key = column_key(pred) if pred is not None else None
            if key is not None:
                pool.add(gold.db, key, lit.this.strip("%"))
    return pool
