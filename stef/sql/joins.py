"""Joined tables that give a query nothing: no column of theirs is read outside the join.

A table joined only to be joined, at a leaf of the join graph (its ON conditions reach one
other table), changes the answer without taking part in it: an inner join keeps only the rows
that have a match in it and repeats the rows that have several, so COUNT, SUM and the listed
rows change. A table joined between two others (``hero_power`` between ``superhero`` and
``superpower``) is a bridge and reads as used.

Read only where every column is placed: one SELECT with no subquery, set operation, CTE nor
``*`` (``COUNT(*)`` counts the join's rows, so every table takes part), and every column outside
the ON conditions qualified by its table or alias.
"""

from __future__ import annotations

from sqlglot import exp


def _on_columns(select: exp.Select) -> tuple[set[int], dict[str, set[str]]]:
    """The column nodes of the ON conditions (by ``id``), and which tables each ON equality
    links (by alias, case-folded)."""
    nodes: set[int] = set()
    links: dict[str, set[str]] = {}
    for join in select.args.get("joins") or ():
        on = join.args.get("on")
        if on is None:
            continue
        nodes.update(id(c) for c in on.find_all(exp.Column))
        for eq in on.find_all(exp.EQ):
            left, right = eq.left, eq.right
            if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
                continue
            a, b = left.table.casefold(), right.table.casefold()
            if a and b and a != b:
                links.setdefault(a, set()).add(b)
                links.setdefault(b, set()).add(a)
    return nodes, links


def idle_joins(stmt: exp.Expr) -> list[str]:
    """The tables (by alias, else name, case-folded) of a joining SELECT that no column outside
    the ON conditions reads and that are joined to at most one other table; empty where that
    cannot be read (see the module docstring)."""
    if not isinstance(stmt, exp.Select) or not stmt.args.get("joins"):
        return []
    if stmt.find(exp.Subquery, exp.SetOperation, exp.CTE, exp.Star):
        return []
    tables = [t.alias_or_name.casefold() for t in stmt.find_all(exp.Table)]
    if len(set(tables)) < 2:
        return []
    on_nodes, links = _on_columns(stmt)
    read = [c for c in stmt.find_all(exp.Column) if id(c) not in on_nodes]
    if any(not c.table for c in read):
        return []
    used = {c.table.casefold() for c in read}
    return [t for t in dict.fromkeys(tables) if t not in used and len(links.get(t, ())) <= 1]
