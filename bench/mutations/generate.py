"""The variants of each gold: every transform that applies, once per gold, seeded per gold and
type (the same golds give the same variants on every run and machine)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from bench.mutations import aliases, right, wrong
from bench.mutations.golds import Gold, parse, render
from bench.mutations.sites import Pool
from bench.mutations.text import Rewrite, case_folded

SEED = 29
Kind = Literal["wrong", "right"]
Transform = Callable[[exp.Expr, Gold, Pool, random.Random], "str | Rewrite | None"]

WRONG: dict[str, Transform] = dict(wrong.TRANSFORMS)
RIGHT: dict[str, Transform] = {
    "reformatted": right.reformatted,
    "commuted": right.commuted,
    "and_swapped": right.and_swapped,
    "between_split": right.between_split,
    "date_range_closed": right.date_range_closed,
    "alias_renamed": aliases.alias_renamed,
    "order_by_alias": aliases.order_by_alias,
    "parenthesized": right.parenthesized,
}
TYPES: dict[str, Kind] = {**dict.fromkeys(WRONG, "wrong"), **dict.fromkeys(RIGHT, "right")}


@dataclass(frozen=True)
class Variant:
    """One variant of a gold: ``kind`` wrong (changes what the question names) or right
    (keeps the meaning); ``detail`` says what changed."""

    gold_id: str
    type: str
    kind: Kind
    sql: str
    detail: str


@dataclass(frozen=True)
class Judged:
    """A gold as the benchmark judges it (sqlglot's rendering) with its variants."""

    gold: Gold
    sql: str
    variants: list[Variant]


def variants_of(gold: Gold, pool: Pool, types: Sequence[str], seed: int = SEED) -> Judged | None:
    """The gold's rendering and a variant per type that applies; None when sqlglot cannot
    read the gold."""
    tree = parse(gold.gold_sql)
    if tree is None:
        return None
    base = render(tree)
    out: list[Variant] = []
    for name in types:
        kind = TYPES[name]
        transform = WRONG[name] if kind == "wrong" else RIGHT[name]
        copy = tree.copy()
        done = transform(copy, gold, pool, random.Random(f"{seed}:{gold.id}:{name}"))
        if done is None:
            continue
        rewrite = Rewrite(done) if isinstance(done, str) else done
        sql = rewrite.sql if rewrite.sql is not None else render(copy)
        if _acceptable(kind, name, sql, tree, base):
            out.append(Variant(gold.id, name, kind, sql, rewrite.detail))
    return Judged(gold, base, out)


def _acceptable(kind: Kind, name: str, sql: str, tree: exp.Expr, base: str) -> bool:
    """A variant parses and is not the gold's text; a wrong one reads differently from the
    gold, a re-formatted one the same up to identifier case."""
    again = parse(sql)
    if again is None or sql == base:
        return False
    if kind == "wrong":
        return render(again) != base
    if name == "reformatted":
        return case_folded(again) == case_folded(tree)
    return True


def generate(
    golds: Iterable[Gold], pool: Pool, types: Sequence[str], seed: int = SEED
) -> tuple[list[Judged], int]:
    """Every gold's variants, in gold order; with the number of golds sqlglot cannot read."""
    out: list[Judged] = []
    unread = 0
    for gold in golds:
        judged = variants_of(gold, pool, types, seed)
        if judged is None:
            unread += 1
        else:
            out.append(judged)
    return out, unread
