"""Wrong variants: each changes exactly one thing the question or its enrichment names.

Every transform takes a copy of the gold's tree, changes it in place and returns what it changed
(or None when it does not apply to this gold); the generator renders and checks the result.
"""

from __future__ import annotations

import random
import re
from datetime import date

from sqlglot import exp

from bench.mutations.golds import Gold, is_named, number_of, numbers_named
from bench.mutations.sites import (
    AGGREGATE_WORDS,
    RANKING,
    Pool,
    column_key,
    conjuncts,
    in_predicate,
    literal_comparisons,
    set_conjuncts,
    the_literal,
    wheres,
)

_DATE = re.compile(r"^(\d{4})(-\d{2}-\d{2}.*)$")
_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.GTE: exp.LTE,
    exp.LTE: exp.GTE,
}
_SWAP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.Max: exp.Min,
    exp.Min: exp.Max,
    exp.Sum: exp.Avg,
    exp.Avg: exp.Sum,
}


def _named_literals(tree: exp.Expr, gold: Gold, *, strings: bool) -> list[exp.Literal]:
    text, numbers = gold.text, numbers_named(gold.text)
    return [
        lit
        for lit in tree.find_all(exp.Literal)
        if lit.is_string == strings and in_predicate(lit) and is_named(lit, text, numbers)
    ]


def _other_number(value: float, digits: int, taken: set[float], rng: random.Random) -> str:
    step = 10.0**-digits
    options = [v for v in (value + step, value - step) if v not in taken and (v >= 0 or value < 0)]
    new = rng.choice(options) if options else value + 2 * step
    return f"{new:.{digits}f}" if digits else str(round(new))


def _digits(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def number_changed(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    sites = _named_literals(tree, gold, strings=False)
    if not sites:
        return None
    lit = rng.choice(sites)
    value = number_of(lit)
    assert value is not None
    new = _other_number(value, _digits(lit.this), numbers_named(gold.text), rng)
    lit.replace(exp.Literal.number(new))
    return f"{lit.this} -> {new}"


def _replacement(lit: exp.Literal, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    """A different plausible value for a named string: a number or a date moved by one, else
    another value compared with the same column (this database's first) that the question
    does not name."""
    value: str = lit.this
    core = value.strip("%")
    number = number_of(lit)
    if number is not None and core.isdigit():
        new = str(max(int(core) + rng.choice((1, -1)), 0 if int(core) else 1)).zfill(len(core))
        return value.replace(core, new, 1)
    if number is not None:
        return value.replace(core, _other_number(number, _digits(core), set(), rng), 1)
    if m := _DATE.match(core):
        try:
            date.fromisoformat(core[:10])
        except ValueError:
            return None
        return value.replace(core, f"{int(m.group(1)) + rng.choice((1, -1))}{m.group(2)}", 1)
    pred = lit.parent
    while pred is not None and not isinstance(pred, exp.Predicate):
        pred = pred.parent
    key = column_key(pred) if pred is not None else None
    if key is None:
        return None
    for values in pool.values(gold.db, key):
        fresh = [
            v for v in values if v and v.lower() != core.lower() and v.lower() not in gold.text
        ]
        if fresh:
            return value.replace(core, rng.choice(fresh), 1)
    return None


def string_replaced(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    sites = _named_literals(tree, gold, strings=True)
    rng.shuffle(sites)
    for lit in sites:
        new = _replacement(lit, gold, pool, rng)
        if new is not None and new != lit.this:
            old = lit.this
            lit.replace(exp.Literal.string(new))
            return f"'{old}' -> '{new}'"
    return None


def comparator_flipped(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    text, numbers = gold.text, numbers_named(gold.text)
    sites = [
        node
        for node in literal_comparisons(tree)
        if type(node) in _FLIP and is_named(the_literal(node), text, numbers)
    ]
    if not sites:
        return None
    node = rng.choice(sites)
    flipped = _FLIP[type(node)](this=node.this, expression=node.expression)
    before = node.sql(dialect="sqlite")
    node.replace(flipped)
    return f"{before} -> {flipped.sql(dialect='sqlite')}"


def predicate_dropped(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    text, numbers = gold.text, numbers_named(gold.text)
    sites: list[tuple[exp.Where, int]] = []
    for where in wheres(tree):
        for i, part in enumerate(conjuncts(where)):
            lits = part.find_all(exp.Literal)
            if any(in_predicate(x) and is_named(x, text, numbers) for x in lits):
                sites.append((where, i))
    if not sites:
        return None
    where, i = rng.choice(sites)
    parts = conjuncts(where)
    dropped = parts.pop(i)
    set_conjuncts(where, parts)
    return f"dropped {dropped.sql(dialect='sqlite')}"


def _ranked_selects(tree: exp.Expr, gold: Gold) -> list[exp.Select]:
    if not RANKING.search(gold.text):
        return []
    return [
        s
        for s in tree.find_all(exp.Select)
        if s.args.get("order") and isinstance(s.args.get("limit"), exp.Limit)
    ]


def order_flipped(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    selects = _ranked_selects(tree, gold)
    if not selects:
        return None
    first = rng.choice(selects).args["order"].expressions[0]
    desc = not first.args.get("desc")
    # SQLite sorts NULLs first ascending and last descending: keep its default, add no NULLS.
    first.set("desc", desc)
    first.set("nulls_first", not desc)
    return f"ORDER BY {first.this.sql(dialect='sqlite')} {'DESC' if desc else 'ASC'}"


def limit_changed(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    sites = []
    for select in _ranked_selects(tree, gold):
        lit = select.args["limit"].expression
        if isinstance(lit, exp.Literal) and not lit.is_string and lit.this.isdigit():
            sites.append(lit)
    if not sites:
        return None
    lit = rng.choice(sites)
    n = int(lit.this)
    new = rng.choice((2, 3)) if n <= 1 else rng.choice((n - 1, n + 1))
    lit.replace(exp.Literal.number(new))
    return f"LIMIT {n} -> {new}"


def aggregate_swapped(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> str | None:
    sites = [
        node
        for kind, words in AGGREGATE_WORDS.items()
        if words.search(gold.text)
        for node in tree.find_all(kind)
        if type(node) is kind and not node.expressions  # MAX(a, b) is SQLite's scalar max
    ]
    if not sites:
        return None
    node = rng.choice(sites)
    swapped = _SWAP[type(node)](this=node.this)
    before = node.sql(dialect="sqlite")
    node.replace(swapped)
    return f"{before} -> {swapped.sql(dialect='sqlite')}"


TRANSFORMS = {
    "number_changed": number_changed,
    "string_replaced": string_replaced,
    "comparator_flipped": comparator_flipped,
    "predicate_dropped": predicate_dropped,
    "order_flipped": order_flipped,
    "limit_changed": limit_changed,
    "aggregate_swapped": aggregate_swapped,
}
