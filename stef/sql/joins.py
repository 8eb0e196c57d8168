"""Joined tables that give a query nothing: no column of theirs is read outside the join.

A table joined only to be joined, at a leaf of the join graph (its ON conditions reach one
other table), changes the answer without taking part in it: an inner join keeps only the rows
that have a match in it and repeats the rows that have several, so COUNT, SUM and the listed
rows change. A table joined between two others (``hero_power`` between ``superhero`` and
``superpower``) is a bridge and reads as used.

Read only where every column is placed: one SELECT with no subquery, set operation, CTE nor
``*`` (``COUNT(*)`` counts the join's rows, so every table takes part), and every column outside
the ON conditions qualified by its table or alias. Nothing is said where the answer keeps no
repeats (``DISTINCT``, ``COUNT(DISTINCT ...)``, a grouping without other aggregates): there
such a join is a semi-join, "the customers who placed an order".
"""

from __future__ import annotations

from difflib import SequenceMatcher

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
    if stmt.find(exp.Subquery, exp.SetOperation, exp.CTE, exp.Star) or _keeps_no_repeats(stmt):
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


def _keeps_no_repeats(select: exp.Select) -> bool:
    """The answer is blind to repeated rows: ``SELECT DISTINCT``, or a grouping or aggregate
    whose every aggregate is ``COUNT(DISTINCT ...)``, ``MIN`` or ``MAX``. A join there only
    keeps the rows that have a match, the usual way to write "the customers who placed an
    order" (a semi-join), so whether it belongs is the question's to say, not the join's."""
    if select.args.get("distinct"):
        return True
    aggregates = list(select.find_all(exp.AggFunc))
    if not aggregates and not select.args.get("group"):
        return False
    return all(
        isinstance(a, exp.Min | exp.Max)
        or (isinstance(a, exp.Count) and isinstance(a.this, exp.Distinct))
        for a in aggregates
    )


# ------------------------------------------------------------------ join keys that name two things

# Names that say "the key of this table" and nothing more: ``airlines.uid = flights.airline``.
_KEY_NAMES = frozenset({"id", "uid", "pk", "key", "code"})
# Two names that share this many letters in a row name one thing (``DestAirport`` and
# ``AirportCode``); read case-folded, so that the way the SQL is printed changes nothing.
_MIN_SHARED = 4
# A table named inside a column name: at least this many letters (``hero`` in ``superhero``).
_MIN_WORD = 3


def _flat(name: str) -> str:
    """A name case-folded, without underscores nor a trailing ``id``: ``Hero_Id`` is ``hero``."""
    flat = name.casefold().replace("_", "")
    return flat[:-2] if flat.endswith("id") and len(flat) > 2 else flat


def _names_one_thing(left: str, left_table: str, right: str, right_table: str) -> bool:
    """Whether ``left_table.left = right_table.right`` can join one thing's key: the same
    name, one inside the other (``zip`` and ``zip_code``), four letters in a row in common
    (``DestAirport`` and ``AirportCode``), or a bare key (``id``) on the side whose table the
    other names (``superhero.id`` and ``hero_id``)."""
    a, b = left.casefold(), right.casefold()
    if a == b:
        return True
    flat_a, flat_b = _flat(a), _flat(b)
    short, long = sorted((flat_a, flat_b), key=len)
    if len(short) >= _MIN_WORD and short in long:
        return True  # zip and zip_code
    shared = SequenceMatcher(None, flat_a, flat_b, autojunk=False).find_longest_match()
    if shared.size >= _MIN_SHARED:
        return True
    return _keyed(a, left_table, flat_b) or _keyed(b, right_table, flat_a)


def _keyed(name: str, table: str, other: str) -> bool:
    """``name`` is a bare key of ``table`` and ``other`` (flattened) names that table, in full
    or abbreviated."""
    if _flat(name) and name not in _KEY_NAMES:
        return False
    flat = table.casefold().replace("_", "")
    single = flat[:-1] if flat.endswith("s") else flat
    if len(other) >= _MIN_WORD and (other in flat or single in other):
        return True
    return _abbreviates(other, flat)


def _abbreviates(word: str, table: str) -> bool:
    """``c``, ``cust`` or ``emp`` (of ``cid``, ``cust_id``, ``emp_id``) for ``customers`` and
    ``employees``: the table name's first letter and then others of it in order."""
    if not word or not table or word[0] != table[0]:
        return False
    rest = iter(table[1:])
    return all(ch in rest for ch in word[1:])


def mismatched_keys(stmt: exp.Expr) -> list[str]:
    """The ON equalities of ``stmt`` between qualified columns of two tables whose names name
    different things (``atom.atom_id = bond.bond_id``, ``cards.uuid = sets.code``), as
    ``table.column = table.column``."""
    joins = [j for j in stmt.find_all(exp.Join) if j.args.get("on") is not None]
    if not joins:
        return []  # most queries: the tables are not gathered (a tenth of the check's time)
    tables = {t.alias_or_name.casefold(): t.name for t in stmt.find_all(exp.Table)}
    out = []
    for join in joins:
        for eq in join.args["on"].find_all(exp.EQ):
            left, right = eq.left, eq.right
            if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
                continue
            if not (left.table and right.table):
                continue
            lt = tables.get(left.table.casefold(), left.table)
            rt = tables.get(right.table.casefold(), right.table)
            if lt.casefold() == rt.casefold():
                continue
            if _names_one_thing(left.name, lt, right.name, rt):
                continue
            names = {t.casefold().replace("_", "") for t in tables.values()}
            if _role(left.name, names, right.name, rt) or _role(right.name, names, left.name, lt):
                continue
            out.append(f"{lt}.{left.name} = {rt}.{right.name}")
    return list(dict.fromkeys(out))


def _role(name: str, tables: set[str], other: str, other_table: str) -> bool:
    """``matches.winner_id = players.player_id``: a key named for the role it plays (no table
    of the query is called ``winner``) against the key of the other table, which it may well
    hold; said only by the schema, so not read as a mismatch."""
    folded = name.casefold()
    if not folded.endswith("_id"):
        return False
    word = _flat(folded)
    if any(word in t or t.rstrip("s") in word for t in tables):
        return False
    return other.casefold() in _KEY_NAMES or _keyed("id", other_table, _flat(other))
