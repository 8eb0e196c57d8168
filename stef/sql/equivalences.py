"""Equivalent rewrites of reference mode: a query brought to one canonical shape in place, so
that two ways of writing the same answer compare equal (:mod:`stef.sql.compare`).

Each rewrite turns a common equivalent form into one chosen form: table aliases into table
names, a derived table that only passes columns through into its body, presentation-only
wrappers and number spellings into the bare value, conditional counts into ``COUNT_IF``,
semi-joins into joins, the extreme into ``ORDER BY ... LIMIT 1``, a table joined only through its
key out of the join graph, and GROUP BY without aggregates into DISTINCT. The extreme and the
semi-join are equal only up to ties and duplicates: the readings people accept as the same answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from sqlglot import exp

from stef.sql.canonical import canon
from stef.sql.forms import canonical_forms


def rewritten(tree: exp.Expr, dialect: str | None = None) -> tuple[exp.Expr, exp.Select]:
    """``tree`` in canonical shape: the main query (``tree`` itself or a rewritten copy of a
    part of it) and its main SELECT, changed in place.

    Raises:
        ValueError: the query has no SELECT.
    """
    _resolve_aliases(tree)
    canonical_forms(tree, dialect)
    main = tree
    while isinstance(main, exp.Subquery):
        main = main.this
    main = _unwrapped(main)
    first = main  # a set operation's main SELECT is its first branch, however deep
    while isinstance(first, exp.SetOperation | exp.Subquery):
        first = first.this
    select = first if isinstance(first, exp.Select) else main.find(exp.Select)
    if select is None:
        raise ValueError("no SELECT")
    _canonical_values(main)
    _semi_joins(select)
    _extreme_as_top(select)
    _drop_bridges(select)
    _grouping_as_distinct(select)
    return main, select


# The float types a CAST to which only asks for a non-integer division.
_FLOAT_TYPES = frozenset(("float", "double", "real", "decimal", "numeric", "double precision"))


def _resolve_aliases(tree: exp.Expr) -> None:
    """Table aliases replaced by the tables' names in every column qualifier, in place."""
    for select in tree.find_all(exp.Select):
        names: dict[str, str] = {}
        for table in select.find_all(exp.Table):
            if table.alias:
                names[table.alias.casefold()] = table.name.casefold()
        source = select.args.get("from_") or select.args.get("from")
        single = (
            source.this.name.casefold()
            if isinstance(source, exp.From)
            and isinstance(source.this, exp.Table)
            and not select.args.get("joins")
            else None
        )
        for column in select.find_all(exp.Column):
            qualifier = column.table.casefold()
            if qualifier in names:
                column.set("table", exp.to_identifier(names[qualifier]))
            elif not qualifier and single is not None and column.parent_select is select:
                # One table read: an unqualified column is that table's.
                column.set("table", exp.to_identifier(single))


def _canonical_values(root: exp.Expr) -> None:
    """Presentation-only wrappers removed and numbers spelled one way: ROUND(x, n) reads x, a
    CAST to a float type or ``* 1.0`` reads as the value, 100.0 reads 100, and counting
    conditionally (SUM(CASE WHEN c THEN 1 ELSE 0 END), SUM(IIF(c, 1, 0)),
    COUNT(CASE WHEN c THEN x END)) reads COUNT_IF(c)."""
    for node in list(root.find_all(exp.Round, exp.Cast, exp.Mul, exp.Literal, exp.Sum, exp.Count)):
        if node.parent is None and node is not root:
            continue
        replacement = _canonical_value(node)
        if replacement is None or replacement is node:
            continue
        if isinstance(node, exp.Literal) and isinstance(replacement, exp.Literal):
            # In place: replacing an item of a list re-parents the whole list (sqlglot), and an
            # IN list of 3,900 numbers took 2 s.
            node.set("this", replacement.this)
        else:
            node.replace(replacement)


def _canonical_value(node: exp.Expr) -> exp.Expr | None:
    if isinstance(node, exp.Round) and isinstance(node.parent, exp.Select | exp.Alias):
        return cast(exp.Expr, node.this)
    if isinstance(node, exp.Cast) and node.to.this.value.lower() in _FLOAT_TYPES:
        return cast(exp.Expr, node.this)
    if isinstance(node, exp.Mul):
        return _times_one(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        value = _number(node.this)
        if value is not None and value.is_integer() and abs(value) < 1e15:
            return exp.Literal.number(int(value))
    if isinstance(node, exp.Sum | exp.Count):
        return _counted(node)
    return None


def _times_one(node: exp.Mul) -> exp.Expr | None:
    """``x * 1`` (or ``1.0 * x``) as ``x``."""
    for a, b in ((node.this, node.expression), (node.expression, node.this)):
        if isinstance(a, exp.Literal) and not a.is_string and _number(a.this) == 1.0:
            return cast(exp.Expr, b)
    return None


def _counted(node: exp.Sum | exp.Count) -> exp.Expr | None:
    """A SUM of 1/0 or a COUNT of CASE WHEN as ``COUNT_IF(c)``; ``COUNT(col)`` as ``COUNT(*)``."""
    condition = _counted_condition(node)
    if condition is not None:
        return exp.Anonymous(this="COUNT_IF", expressions=[condition])
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Column):
        # COUNT(col) counts the rows (but NULLs): which column is named is no difference.
        return exp.Count(this=exp.Star())
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _counted_condition(agg: exp.Sum | exp.Count) -> exp.Expr | None:
    """The condition a SUM of 1/0 or a COUNT of CASE WHEN c THEN x END counts; else None."""
    arg = agg.this
    if isinstance(arg, exp.Distinct):
        return None
    if isinstance(arg, exp.If):  # IIF(c, 1, 0)
        true, false, cond = arg.args.get("true"), arg.args.get("false"), arg.this
        ifs = [(cond, true)]
    elif isinstance(arg, exp.Case) and len(arg.args.get("ifs") or []) == 1 and arg.this is None:
        branch = arg.args["ifs"][0]
        ifs = [(branch.this, branch.args.get("true"))]
        false = arg.args.get("default")
    else:
        return None
    cond, true = ifs[0]
    if isinstance(agg, exp.Sum):
        if number_of(true) == 1.0 and number_of(false) == 0.0:
            return cast(exp.Expr, cond)
        return None
    if (
        true is not None
        and not isinstance(true, exp.Null)
        and (false is None or isinstance(false, exp.Null))
    ):
        return cast(exp.Expr, cond)
    return None


def number_of(node: exp.Expr | None) -> float | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        return _number(node.this)
    return None


def _where_terms(select: exp.Select) -> list[exp.Expr]:
    where = select.args.get("where")
    return list(conjuncts(where.this)) if where is not None else []


def _set_where(select: exp.Select, terms: list[exp.Expr]) -> None:
    select.set("where", exp.Where(this=exp.and_(*terms)) if terms else None)


def _semi_joins(select: exp.Select) -> None:
    """``a.x IN (SELECT t.y FROM t WHERE p)`` read as ``JOIN t ON a.x = t.y WHERE p``."""
    terms = _where_terms(select)
    kept: list[exp.Expr] = []
    changed = False
    for term in terms:
        column_side, inner = _subquery_side(term)
        body = inner.this if isinstance(inner, exp.Subquery) else inner
        table = _single_table(body)
        if (
            isinstance(column_side, exp.Column)
            and isinstance(body, exp.Select)
            and table is not None
            and len(body.expressions) == 1
            and isinstance(body.expressions[0].unalias(), exp.Column)
        ):
            name = table.name.casefold()
            column = body.expressions[0].unalias()
            on = exp.EQ(
                this=column_side.copy(),
                expression=exp.column(column.name, table=name),
            )
            select.append("joins", exp.Join(this=exp.to_table(name), on=on))
            kept.extend(t.copy() for t in _where_terms(body))
            changed = True
            continue
        kept.append(term)
    if changed:
        _set_where(select, kept)


def _unwrapped(main: exp.Expr) -> exp.Expr:
    """``SELECT t.a FROM (SELECT a, b ... LIMIT 1) AS t`` read as the inner SELECT projecting
    only ``a``: an outer query that just picks columns of one derived table adds nothing."""
    if not isinstance(main, exp.Select) or any(
        main.args.get(k) for k in ("joins", "where", "group", "having", "order", "limit")
    ):
        return main
    source = main.args.get("from_") or main.args.get("from")
    inner = source.this if isinstance(source, exp.From) else None
    body = inner.this if isinstance(inner, exp.Subquery) else None
    if not isinstance(body, exp.Select) or main.args.get("distinct"):
        return main
    by_name = {p.alias_or_name.casefold(): p for p in body.expressions}
    picked = []
    for p in main.expressions:
        column = p.unalias()
        target = by_name.get(column.name.casefold()) if isinstance(column, exp.Column) else None
        if target is None:
            return main
        picked.append(target.copy())
    unwrapped = body.copy()
    unwrapped.set("expressions", picked)
    return unwrapped


def _single_table(body: exp.Expr | None) -> exp.Table | None:
    """The one table a plain SELECT reads (no join, grouping or limit); else None."""
    if not isinstance(body, exp.Select):
        return None
    if body.args.get("joins") or body.args.get("group") or body.args.get("limit"):
        return None
    source = body.args.get("from_") or body.args.get("from")
    table = source.this if isinstance(source, exp.From) else None
    return table if isinstance(table, exp.Table) else None


def _subquery_side(term: exp.Expr) -> tuple[exp.Expr | None, exp.Expr | None]:
    """(column, subquery) of ``column IN (SELECT ...)`` or ``column = (SELECT ...)``."""
    if isinstance(term, exp.In):
        return term.this, term.args.get("query")
    if isinstance(term, exp.EQ):
        for a, b in ((term.this, term.expression), (term.expression, term.this)):
            if isinstance(b, exp.Subquery) and isinstance(a, exp.Column):
                return a, b
    return None, None


def _extreme_as_top(select: exp.Select) -> None:
    """``WHERE x = (SELECT MAX(x) FROM ...)`` read as ``ORDER BY x DESC LIMIT 1`` (MIN: ASC)."""
    if select.args.get("order") or select.args.get("limit"):
        return
    terms = _where_terms(select)
    for i, term in enumerate(terms):
        if not isinstance(term, exp.EQ):
            continue
        for col, sub in ((term.this, term.expression), (term.expression, term.this)):
            body = sub.this if isinstance(sub, exp.Subquery) else None
            if not isinstance(col, exp.Column) or not isinstance(body, exp.Select):
                continue
            if len(body.expressions) != 1:
                continue
            agg = body.expressions[0].unalias()
            if not isinstance(agg, exp.Max | exp.Min) or canon(agg.this) != canon(col):
                continue
            rest = terms[:i] + terms[i + 1 :]
            inner_filters = {canon(t) for t in _where_terms(body)}
            # The subquery's own filters repeat the outer ones: they go with it.
            rest = [t for t in rest if canon(t) not in inner_filters] if inner_filters else rest
            _set_where(select, rest)
            select.set(
                "order",
                exp.Order(
                    expressions=[exp.Ordered(this=col.copy(), desc=isinstance(agg, exp.Max))]
                ),
            )
            select.set("limit", exp.Limit(expression=exp.Literal.number(1)))
            return


@dataclass(frozen=True)
class _Bridge:
    """A joined table that only bridges: its join equalities, the columns they join it to, and
    the other uses of its key (filters, which read the key it is joined to)."""

    edges: list[exp.EQ]
    others: list[exp.Column]
    filters_on_key: list[exp.Column]


def _drop_bridges(select: exp.Select) -> None:
    """A joined table read only through its join keys, joined on one column name to two
    tables (or to one), dropped: ``a JOIN m ON a.k = m.k JOIN b ON m.k = b.k`` reads
    ``a JOIN b ON a.k = b.k``; a table only joined through its key restricts nothing more the
    key's reference does not (the usual foreign key)."""
    joins = list(select.args.get("joins") or [])
    tables = [t.name.casefold() for t in select.find_all(exp.Table)]
    columns = list(select.find_all(exp.Column))
    if any(not c.table for c in columns) and len(set(tables)) > 1:
        return  # an unqualified column may read any table: nothing is known to be unused
    # Each table's uses and join equalities, read once (per join, 600 joins took 2.6 s).
    counts = Counter(tables)
    uses: dict[str, list[exp.Column]] = {}
    for column in columns:
        uses.setdefault(column.table.casefold(), []).append(column)
    edges: dict[str, list[exp.EQ]] = {}
    for eq in _all_equalities(select):
        for name in dict.fromkeys(side.table.casefold() for side in (eq.this, eq.expression)):
            edges.setdefault(name, []).append(eq)
    for join in joins:
        table = join.this
        if (
            not isinstance(table, exp.Table)
            or join.args.get("on") is None
            or (join.side or "")
            or counts[table.name.casefold()] != 1
        ):
            continue
        name = table.name.casefold()
        bridge = _bridge(name, edges.get(name, []), uses.get(name, []))
        if bridge is not None:
            _remove_bridge(select, join, bridge)
            return


def _bridge(name: str, edges: list[exp.EQ], uses: list[exp.Column]) -> _Bridge | None:
    """The joined table ``name`` as a bridge, or None when dropping it could change rows:
    ``edges`` are the join equalities with a column of it, ``uses`` its columns."""

    def mine(s: exp.Expr) -> bool:
        return isinstance(s, exp.Column) and s.table.casefold() == name

    in_edges = sum(1 for e in edges for s in (e.this, e.expression) if mine(s))
    filters_on_key = [
        c for c in uses if not any(c is s for e in edges for s in (e.this, e.expression))
    ]
    keys = {c.name.casefold() for c in uses}
    if len(keys) != 1 or not 1 <= len(edges) <= 2 or in_edges != len(edges):
        return None
    others = [s for e in edges for s in (e.this, e.expression) if not mine(s)]
    if not all(isinstance(o, exp.Column) for o in others):
        return None
    if len(others) == 1 and others[0].name.casefold() not in keys:
        # One edge: only a key of the same name (the usual foreign key) restricts nothing.
        return None
    if not own_key(name, next(iter(keys))):
        # Joined on another table's key (``account JOIN loan ON account_id``): the join
        # keeps only the rows that have a match there, and repeats them.
        return None
    return _Bridge(edges, cast(list[exp.Column], others), filters_on_key)


def _remove_bridge(select: exp.Select, join: exp.Join, bridge: _Bridge) -> None:
    """``join`` gone; filters on its key read the key it was joined to; two columns it joined
    are joined to each other instead."""
    others = bridge.others
    for c in bridge.filters_on_key:
        c.replace(others[0].copy())
    for e in bridge.edges:
        _remove_condition(e)
    join.pop()
    if len(others) == 2:
        first = next(iter(select.args.get("joins") or []), None)
        cond = exp.EQ(this=others[0].copy(), expression=others[1].copy())
        if first is not None:
            first.set("on", exp.and_(first.args["on"], cond) if first.args.get("on") else cond)


def own_key(table: str, column: str) -> bool:
    """Whether ``column`` is ``table``'s own key by its name: ``id``, ``<table>id``,
    ``<table>_id`` (case and underscores aside)."""
    bare = table.casefold().replace("_", "")
    name = column.casefold()
    return name == "id" or name.replace("_", "") == f"{bare}id"


def table_key(table: str, column: str) -> bool:
    """Whether ``column`` is ``table``'s own key by its name, a plural table's singular too
    (``drivers.driverId``, ``countries.country_id``, ``matches.match_id``)."""
    forms = [table]
    folded = table.casefold()
    if folded.endswith("ies"):
        forms.append(table[:-3] + "y")
    if folded.endswith("es"):
        forms.append(table[:-2])
    if folded.endswith("s"):
        forms.append(table[:-1])
    return any(own_key(form, column) for form in forms)


def _all_equalities(select: exp.Select) -> list[exp.EQ]:
    out: list[exp.EQ] = []
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            out.extend(
                c
                for c in conjuncts(on)
                if isinstance(c, exp.EQ)
                and isinstance(c.this, exp.Column)
                and isinstance(c.expression, exp.Column)
            )
    return out


def _remove_condition(cond: exp.Expr) -> None:
    parent = cond.parent
    while isinstance(parent, exp.Paren):
        cond, parent = parent, parent.parent
    if isinstance(parent, exp.And):
        other = parent.expression if parent.this is cond else parent.this
        parent.replace(other)
    elif isinstance(parent, exp.Join):
        parent.set("on", None)
    else:
        cond.pop()


def _grouping_as_distinct(select: exp.Select) -> None:
    """GROUP BY the projected columns without any aggregate read as SELECT DISTINCT."""
    group = select.args.get("group")
    if group is None or select.args.get("having") or select.find(exp.AggFunc):
        return
    projected = {canon(p.unalias()) for p in select.expressions}
    if {canon(g) for g in group.expressions} <= projected:
        select.set("group", None)
        select.set("distinct", exp.Distinct())


def conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    """The AND-ed terms of a condition, parentheses removed."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from conjuncts(node.this)
        yield from conjuncts(node.expression)
    else:
        yield node
