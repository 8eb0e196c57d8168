"""Right variants on names (issue 30): an alias renamed, ORDER BY an alias or its expression."""

from __future__ import annotations

import random

from sqlglot import exp

from bench.mutations.golds import DIALECT, Gold
from bench.mutations.sites import Pool
from bench.mutations.text import Rewrite


def _names(tree: exp.Expr) -> set[str]:
    return {i.this.lower() for i in tree.find_all(exp.Identifier)}


def _fresh(tree: exp.Expr, base: str) -> str:
    taken = _names(tree)
    name, n = base, 1
    while name.lower() in taken:
        n += 1
        name = f"{base}{n}"
    return name


def _projection_alias(tree: exp.Expr) -> tuple[exp.Alias, list[exp.Column]] | None:
    """A projection alias defined once whose every use is safe to rename with it: an
    unqualified column of its own SELECT's ORDER BY, GROUP BY or HAVING; no table or real
    column of the query has its name."""
    defined: dict[str, list[exp.Alias]] = {}
    for select in tree.find_all(exp.Select):
        for proj in select.expressions:
            if isinstance(proj, exp.Alias):
                defined.setdefault(proj.alias.lower(), []).append(proj)
    tables = {t.name.lower() for t in tree.find_all(exp.Table)}
    for name, aliases in sorted(defined.items()):
        if len(aliases) != 1 or name in tables:
            continue
        alias = aliases[0]
        uses = [c for c in tree.find_all(exp.Column) if c.name.lower() == name]
        if all(not c.table and _in_tail(c, alias.parent) for c in uses):
            return alias, uses
    return None


def _in_tail(column: exp.Column, select: exp.Expr | None) -> bool:
    """Whether the column sits in ``select``'s ORDER BY, GROUP BY or HAVING (not deeper)."""
    node: exp.Expr | None = column
    while node is not None and not isinstance(node, exp.Order | exp.Group | exp.Having):
        if isinstance(node, exp.Select):
            return False
        node = node.parent
    return node is not None and node.parent is select


def _table_alias(tree: exp.Expr) -> str | None:
    """A table alias no table, column or projection alias also names."""
    tables = {t.name.lower() for t in tree.find_all(exp.Table)}
    columns = {c.name.lower() for c in tree.find_all(exp.Column)}
    projected = {a.alias.lower() for a in tree.find_all(exp.Alias)}
    for alias in tree.find_all(exp.TableAlias):
        name = alias.name.lower()
        if name and name not in tables | columns | projected and not alias.columns:
            return name
    return None


def alias_renamed(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    """A projection alias renamed with its uses; else a table alias renamed everywhere."""
    found = _projection_alias(tree)
    if found is not None:
        alias, uses = found
        old, new = alias.alias, _fresh(tree, f"{alias.alias}_value")
        alias.set("alias", exp.to_identifier(new))
        for col in uses:
            col.set("this", exp.to_identifier(new))
        return Rewrite(f"AS {old} -> AS {new}")
    name = _table_alias(tree)
    if name is None:
        return None
    new = _fresh(tree, f"{name}_r")
    for table_alias in tree.find_all(exp.TableAlias):
        if table_alias.name.lower() == name:
            table_alias.set("this", exp.to_identifier(new))
    for col in tree.find_all(exp.Column):
        if col.table.lower() == name:
            col.set("table", exp.to_identifier(new))
    return Rewrite(f"table alias {name} -> {new}")


def _to_expression(select: exp.Select) -> str | None:
    """ORDER BY a projection's alias -> its expression (SQLite reads the alias first)."""
    aliases = {p.alias.lower(): p for p in select.expressions if isinstance(p, exp.Alias)}
    for ordered in select.args["order"].expressions:
        key = ordered.this
        if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
            expression = aliases[key.name.lower()].this
            if expression.find(exp.Window):
                continue
            key.replace(expression.copy())
            return f"ORDER BY {key.name} -> ORDER BY {expression.sql(dialect=DIALECT)}"
    return None


def _to_alias(tree: exp.Expr, select: exp.Select) -> str | None:
    """ORDER BY an expression the SELECT projects -> ORDER BY its alias (one added if none;
    never on a bare column, whose output name an outer query may read)."""
    for ordered in select.args["order"].expressions:
        key = ordered.this
        for proj in select.expressions:
            inner = proj.this if isinstance(proj, exp.Alias) else proj
            if inner != key or isinstance(proj, exp.Star):
                continue
            if isinstance(proj, exp.Alias):
                name = proj.alias
            elif isinstance(proj, exp.Column):
                continue
            else:
                name = _fresh(tree, "order_value")
                proj.replace(exp.alias_(proj.copy(), name))
            key.replace(exp.column(name))
            return f"ORDER BY {key.sql(dialect=DIALECT)} -> ORDER BY {name}"
    return None


def order_by_alias(tree: exp.Expr, gold: Gold, pool: Pool, rng: random.Random) -> Rewrite | None:
    selects = [s for s in tree.find_all(exp.Select) if s.args.get("order")]
    for select in selects:
        done = _to_expression(select)
        if done:
            return Rewrite(done)
    for select in selects:
        done = _to_alias(tree, select)
        if done:
            return Rewrite(done)
    return None
