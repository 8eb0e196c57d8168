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

import re

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


# ------------------------------------------------------------------ join keys that name two things

# Names that say "the key of this table" and nothing more: ``airlines.uid = flights.airline``.
_KEY_NAMES = frozenset({"id", "uid", "pk", "key", "code"})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")
# Words shorter than this say too little to tie two names together.
_MIN_WORD = 3


def _words(name: str) -> set[str]:
    """The words of a column or table name, singular, without ``id``: ``heroPowerIds`` and
    ``hero_power_id`` are {hero, power}."""
    words = _SPLIT.split(_CAMEL.sub(r"\1_\2", name).casefold())
    return {w[:-1] if w.endswith("s") and len(w) > _MIN_WORD else w for w in words if w} - {"id"}


def _names_one_thing(left: str, left_table: str, right: str, right_table: str) -> bool:
    """Whether ``left_table.left = right_table.right`` can join one thing's key: the same
    name, a word in common (``code`` and ``setCode``), or a bare key (``id``) on the side whose
    table the other names (``superhero.id`` and ``hero_id``)."""
    a, b = left.casefold(), right.casefold()
    if a == b:
        return True
    words_a, words_b = _words(left), _words(right)
    flat_a, flat_b = a.replace("_", ""), b.replace("_", "")
    if any(len(w) >= _MIN_WORD and w in flat_b for w in words_a):
        return True
    if any(len(w) >= _MIN_WORD and w in flat_a for w in words_b):
        return True
    return _keyed(a, words_a, left_table, words_b) or _keyed(b, words_b, right_table, words_a)


def _keyed(name: str, words: set[str], table: str, other: set[str]) -> bool:
    """``name`` is a bare key of ``table`` and the other column names that table, in full or
    abbreviated."""
    if words and name not in _KEY_NAMES:
        return False
    flat = table.casefold().replace("_", "")
    single = flat[:-1] if flat.endswith("s") else flat
    return any(
        (len(w) >= _MIN_WORD and (w in flat or single in w)) or _abbreviates(w, flat) for w in other
    )


def _abbreviates(word: str, table: str) -> bool:
    """``cid``, ``cust`` or ``emp`` for ``customers`` and ``employees``: the word, less a
    trailing ``id``, is the table name's first letter and then others of it in order."""
    stem = word[:-2] if word.endswith("id") and len(word) > 2 else word
    if not stem or not table or stem[0] != table[0]:
        return False
    rest = iter(table[1:])
    return all(ch in rest for ch in stem[1:])


def mismatched_keys(stmt: exp.Expr) -> list[str]:
    """The ON equalities of ``stmt`` between qualified columns of two tables whose names name
    different things (``atom.atom_id = bond.bond_id``, ``cards.uuid = sets.code``), as
    ``table.column = table.column``."""
    tables = {t.alias_or_name.casefold(): t.name for t in stmt.find_all(exp.Table)}
    out = []
    for join in stmt.find_all(exp.Join):
        on = join.args.get("on")
        if on is None:
            continue
        for eq in on.find_all(exp.EQ):
            left, right = eq.left, eq.right
            if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
                continue
            if not (left.table and right.table):
                continue
            lt = tables.get(left.table.casefold(), left.table)
            rt = tables.get(right.table.casefold(), right.table)
            if lt.casefold() == rt.casefold():
                continue
            if not _names_one_thing(left.name, lt, right.name, rt):
                out.append(f"{lt}.{left.name} = {rt}.{right.name}")
    return list(dict.fromkeys(out))
