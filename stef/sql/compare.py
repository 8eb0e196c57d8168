"""Structural comparison of two SQL queries, component by component (reference mode).

Both queries are parsed and brought to one canonical shape before they are compared, so the
rewrites that do not change a result compare equal: table aliases (``molecule AS T1`` reads
``molecule``), join order and ON-versus-WHERE for inner joins, CTEs that sqlglot's optimizer can
merge into their reader, projection order and aliases, commuted comparisons, ``IN`` versus an OR of
equalities, ``BETWEEN`` versus two comparisons, ``'1'`` versus ``1``. What is left is compared as
components: tables, joins, projections, aggregates, DISTINCT, filters, GROUP BY, HAVING, ORDER BY,
LIMIT and the query's shape (subqueries, set operations). Every differing component is one
:class:`Difference`; no difference at all means the two queries have the same structure.

Pure and bounded: no database, no I/O; a parse or optimizer failure is an outcome
(:class:`Comparison` with ``error``), never an exception.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify

from stef.sql.canonical import canon, literal_value
from stef.sql.dialects import render

# The components, in the order differences are listed.
COMPONENTS = (
    "shape",
    "tables",
    "joins",
    "projections",
    "aggregates",
    "distinct",
    "filters",
    "null_checks",
    "group_by",
    "having",
    "order_by",
    "limit",
)
# Differences of duplicates and NULLs only (DISTINCT, GROUP BY on what is projected, IS NOT NULL
# guards): the same rows up to repeats or rows without a value, usually the same answer.
MINOR = frozenset(("distinct", "null_checks", "group_by"))
# Queries whose text is longer than this are compared without sqlglot's optimizer passes (which
# walk scopes repeatedly): the canonical forms below still apply.
_MAX_OPTIMIZED_CHARS = 8_000
# ``x IS NOT NULL`` guards, compared apart from the other filters: they only drop NULLs.
_NOT_NULL = " is not null"
_MIRROR = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
_SYMMETRIC = (exp.EQ, exp.NEQ, exp.NullSafeEQ)
_NEGATED = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.GT: exp.LTE, exp.GTE: exp.LT}
_NEGATED |= {exp.LT: exp.GTE, exp.LTE: exp.GT}


@dataclass(frozen=True)
class Difference:
    """One component that differs: what the generated query has, what the reference has."""

    component: str
    generated: str
    reference: str


@dataclass(frozen=True)
class Parts:
    """The components of one query, each in a canonical, order-free form."""

    shape: tuple[str, ...]
    tables: tuple[str, ...]
    joins: tuple[str, ...]
    projections: tuple[str, ...]
    aggregates: tuple[str, ...]
    distinct: bool
    filters: tuple[str, ...]
    null_checks: tuple[str, ...]
    group_by: tuple[str, ...]
    having: tuple[str, ...]
    order_by: tuple[str, ...]
    limit: str | None


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing a generated query with its reference.

    Attributes:
        differences: the differing components (empty: same structure).
        error: why no comparison was made (``generated_unparsed``, ``reference_unparsed``).
    """

    differences: tuple[Difference, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def equivalent(self) -> bool:
        return self.error is None and not self.differences

    @property
    def minor_only(self) -> bool:
        """Every difference is a minor one (:data:`MINOR`), and there is one at least."""
        return bool(self.differences) and all(d.component in MINOR for d in self.differences)


def compare(
    generated: str, reference: str, dialect: str | None = None, *, ordered: bool = False
) -> Comparison:
    """Compare ``generated`` with ``reference`` component by component.

    Args:
        generated: the agent's SQL.
        reference: the gold SQL it is judged against.
        dialect: the sqlglot dialect both are read in (None: generic).
        ordered: the question asks for an order: ORDER BY counts even without a LIMIT.
    """
    gen, ref = parts_of(generated, dialect), parts_of(reference, dialect)
    return compare_parts(gen, ref, ordered=ordered)


def compare_parts(gen: Parts | None, ref: Parts | None, *, ordered: bool = False) -> Comparison:
    """Compare the components of two queries already taken apart (:func:`parts_of`; None: the
    query did not parse)."""
    if ref is None:
        return Comparison(error="reference_unparsed")
    if gen is None:
        return Comparison(error="generated_unparsed")
    return Comparison(differences=tuple(_differences(gen, ref, ordered=ordered)))


def _differences(gen: Parts, ref: Parts, *, ordered: bool) -> Iterator[Difference]:
    for name in COMPONENTS:
        a, b = getattr(gen, name), getattr(ref, name)
        if name == "order_by" and not ordered and gen.limit is None and ref.limit is None:
            continue  # an order nobody asked for and no LIMIT depends on: presentation
        if name == "projections" and Counter(a) == Counter(b):
            continue
        if isinstance(a, tuple) and name != "order_by":
            same = sorted(set(a)) == sorted(set(b))
        else:
            same = a == b
        if not same:
            yield Difference(name, _show(a), _show(b))


def _show(value: tuple[str, ...] | str | bool | None) -> str:
    if isinstance(value, tuple):
        return ", ".join(value)
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else value


# ------------------------------------------------------------------------ the canonical tree
# The float types a CAST to which only asks for a non-integer division.
_FLOAT_TYPES = frozenset(("float", "double", "real", "decimal", "numeric", "double precision"))


def parts_of(sql: str, dialect: str | None = None) -> Parts | None:
    """The canonical components of ``sql``; None when it does not parse to one query."""
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except (SqlglotError, RecursionError, ValueError):
        return None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        return None
    tree = _optimized(trees[0], dialect, len(sql))
    try:
        return _parts(tree)
    except (SqlglotError, RecursionError, ValueError):
        return None


def _optimized(tree: exp.Expr, dialect: str | None, size: int) -> exp.Expr:
    """``tree`` with CTEs and derived tables merged where sqlglot can (an unmerged CTE or
    subquery stays as written); the tree itself when the optimizer fails or the text is long."""
    if size > _MAX_OPTIMIZED_CHARS:
        return tree
    try:
        qualified = qualify(
            tree.copy(),
            dialect=dialect,
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
            expand_stars=False,
        )
        return merge_subqueries(qualified)
    except (SqlglotError, RecursionError, ValueError, KeyError, AttributeError):
        return tree


def _parts(tree: exp.Expr) -> Parts:
    _resolve_aliases(tree)
    main = tree
    while isinstance(main, exp.Subquery):
        main = main.this
    main = _unwrapped(main)
    select = main if isinstance(main, exp.Select) else main.find(exp.Select)
    if select is None:
        raise ValueError("no SELECT")
    _canonical_values(main)
    _semi_joins(select)
    _extreme_as_top(select)
    _drop_bridges(select)
    _grouping_as_distinct(select)
    shape = _shape(main)
    tables = tuple(sorted(_table_name(t) for t in tree.find_all(exp.Table)))
    joins, join_filters = _joins(select)
    where = select.args.get("where")
    filters = list(_conjuncts(where.this)) if where is not None else []
    predicates = set(_predicates([*filters, *join_filters]))
    having = select.args.get("having")
    projections = tuple(_expr(p.unalias()) for p in select.expressions)
    _expand_aliases(select)
    order = select.args.get("order")
    limit = select.args.get("limit")
    return Parts(
        shape=shape,
        tables=tables,
        joins=joins,
        projections=projections,
        aggregates=tuple(sorted(_expr(a) for a in select.find_all(exp.AggFunc))),
        distinct=select.args.get("distinct") is not None,
        filters=tuple(sorted(p for p in predicates if not p.endswith(_NOT_NULL))),
        null_checks=tuple(sorted(p for p in predicates if p.endswith(_NOT_NULL))),
        group_by=tuple(sorted({_expr(g) for g in _group_terms(select)})),
        having=tuple(sorted(set(_predicates(_conjuncts(having.this))))) if having else (),
        order_by=tuple(_order_term(o) for o in order.expressions) if order is not None else (),
        limit=_limit(limit),
    )


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


# ---------------------------------------------------------------------- equivalent rewrites
# Each rewrites the main SELECT in place into the form of a common equivalent; the ones that are
# equal only up to ties or duplicates (the extreme as ORDER BY ... LIMIT 1, the semi-join) are
# the readings people accept as the same answer.


def _canonical_values(root: exp.Expr) -> None:
    """Presentation-only wrappers removed and numbers spelled one way: ROUND(x, n) reads x, a
    CAST to a float type or ``* 1.0`` reads as the value, 100.0 reads 100, and counting
    conditionally (SUM(CASE WHEN c THEN 1 ELSE 0 END), SUM(IIF(c, 1, 0)),
    COUNT(CASE WHEN c THEN x END)) reads COUNT_IF(c)."""
    for node in list(root.find_all(exp.Round, exp.Cast, exp.Mul, exp.Literal, exp.Sum, exp.Count)):
        if node.parent is None and node is not root:
            continue
        replacement = _canonical_value(node)
        if replacement is not None and replacement is not node:
            node.replace(replacement)


def _canonical_value(node: exp.Expr) -> exp.Expr | None:
    if isinstance(node, exp.Round) and isinstance(node.parent, exp.Select | exp.Alias):
        return cast(exp.Expr, node.this)
    if isinstance(node, exp.Cast) and node.to.this.value.lower() in _FLOAT_TYPES:
        return cast(exp.Expr, node.this)
    if isinstance(node, exp.Mul):
        for a, b in ((node.this, node.expression), (node.expression, node.this)):
            if isinstance(a, exp.Literal) and not a.is_string and _number(a.this) == 1.0:
                return cast(exp.Expr, b)
    if isinstance(node, exp.Literal) and not node.is_string:
        value = _number(node.this)
        if value is not None and value.is_integer() and abs(value) < 1e15:
            return exp.Literal.number(int(value))
    if isinstance(node, exp.Sum | exp.Count):
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
        if _number_of(true) == 1.0 and _number_of(false) == 0.0:
            return cast(exp.Expr, cond)
        return None
    if (
        true is not None
        and not isinstance(true, exp.Null)
        and (false is None or isinstance(false, exp.Null))
    ):
        return cast(exp.Expr, cond)
    return None


def _number_of(node: exp.Expr | None) -> float | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        return _number(node.this)
    return None


def _where_terms(select: exp.Select) -> list[exp.Expr]:
    where = select.args.get("where")
    return list(_conjuncts(where.this)) if where is not None else []


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
    for join in joins:
        table = join.this
        on = join.args.get("on")
        if (
            not isinstance(table, exp.Table)
            or on is None
            or (join.side or "")
            or tables.count(table.name.casefold()) != 1
        ):
            continue
        name = table.name.casefold()
        edges = [
            c
            for c in _all_equalities(select)
            if any(
                isinstance(s, exp.Column) and s.table.casefold() == name
                for s in (c.this, c.expression)
            )
        ]
        uses = [c for c in columns if c.table.casefold() == name]
        in_edges = sum(
            1
            for e in edges
            for s in (e.this, e.expression)
            if isinstance(s, exp.Column) and s.table.casefold() == name
        )
        filters_on_key = [
            c for c in uses if not any(c is s for e in edges for s in (e.this, e.expression))
        ]
        keys = {c.name.casefold() for c in uses}
        if len(keys) != 1 or not 1 <= len(edges) <= 2 or in_edges != len(edges):
            continue
        others = [
            s
            for e in edges
            for s in (e.this, e.expression)
            if not (isinstance(s, exp.Column) and s.table.casefold() == name)
        ]
        if not all(isinstance(o, exp.Column) for o in others):
            continue
        if len(others) == 1 and others[0].name.casefold() not in keys:
            # One edge: only a key of the same name (the usual foreign key) restricts nothing.
            continue
        # Filters on the dropped key read the key it is joined to.
        for c in filters_on_key:
            c.replace(others[0].copy())
        for e in edges:
            _remove_condition(e)
        join.pop()
        if len(others) == 2:
            first = next(iter(select.args.get("joins") or []), None)
            cond = exp.EQ(this=others[0].copy(), expression=others[1].copy())
            if first is not None:
                first.set("on", exp.and_(first.args["on"], cond) if first.args.get("on") else cond)
        return


def _all_equalities(select: exp.Select) -> list[exp.EQ]:
    out: list[exp.EQ] = []
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            out.extend(
                c
                for c in _conjuncts(on)
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


def _expand_aliases(select: exp.Select) -> None:
    """References to a projection's alias in ORDER BY, GROUP BY and HAVING replaced by the
    projection itself (``ORDER BY n`` of ``COUNT(*) AS n`` reads ``ORDER BY COUNT(*)``)."""
    aliases = {p.alias.casefold(): p.this for p in select.expressions if isinstance(p, exp.Alias)}
    if not aliases:
        return
    for key in ("order", "group", "having"):
        clause = select.args.get(key)
        if clause is None:
            continue
        for column in list(clause.find_all(exp.Column)):
            target = aliases.get(column.name.casefold())
            if not column.table and target is not None and not isinstance(target, exp.Column):
                column.replace(target.copy())


def _table_name(table: exp.Table) -> str:
    return table.name.casefold()


def _shape(main: exp.Expr) -> tuple[str, ...]:
    """The query's shape beyond one SELECT: set operations and the depth of subqueries."""
    out: list[str] = []
    for op in main.find_all(exp.Union, exp.Intersect, exp.Except):
        kind = type(op).__name__.lower()
        out.append(f"{kind}{'' if op.args.get('distinct') else ' all'}")
    nested = sum(1 for s in main.find_all(exp.Select) if s is not main) - len(out)
    if nested > 0:
        out.append("subquery")
    return tuple(sorted(out))


def _joins(select: exp.Select) -> tuple[tuple[str, ...], list[exp.Expr]]:
    """The join graph (kind, and the column equalities tying the tables) and the filters an
    inner join's ON carries (they read as WHERE filters)."""
    graph: list[str] = []
    filters: list[exp.Expr] = []
    for join in select.args.get("joins") or []:
        side = (join.side or "").lower()
        kind = "left" if side in ("left", "right") else ("full" if side == "full" else "inner")
        on = join.args.get("on")
        using = join.args.get("using")
        if using:
            graph.append(f"{kind}: using {', '.join(sorted(canon(u) for u in using))}")
            continue
        if on is None:
            graph.append(f"{kind}: cross")
            continue
        for cond in _conjuncts(on):
            if isinstance(cond, exp.EQ) and all(
                isinstance(s, exp.Column) for s in (cond.this, cond.expression)
            ):
                graph.append(
                    f"{kind}: {' = '.join(sorted(_qualified(cond.this, cond.expression)))}"
                )
            elif kind == "inner":
                filters.append(cond)
            else:
                graph.append(f"{kind}: {_expr(cond)}")
    return tuple(sorted(graph)), filters


def _qualified(*columns: exp.Column) -> list[str]:
    return [
        f"{c.table.casefold()}.{c.name.casefold()}" if c.table else c.name.casefold()
        for c in columns
    ]


def _conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    """The AND-ed terms of a condition, parentheses removed."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _predicates(terms: Iterable[exp.Expr]) -> Iterator[str]:
    for term in terms:
        yield from _predicate(term)


def _predicate(term: exp.Expr) -> Iterator[str]:
    """Canonical texts of one conjunct (BETWEEN gives two)."""
    while isinstance(term, exp.Paren):
        term = term.this
    if isinstance(term, exp.Not):
        inner = term.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            yield f"{_expr(inner.this)}{_NOT_NULL}"
            return
        flipped = _NEGATED.get(type(inner))
        if flipped is not None and isinstance(inner, exp.Binary):
            yield from _predicate(flipped(this=inner.this, expression=inner.expression))
            return
        yield "not " + " ".join(_predicate(inner))
        return
    if isinstance(term, exp.Between):
        low, high = term.args.get("low"), term.args.get("high")
        if low is not None and high is not None:
            yield _comparison(exp.GTE(this=term.this, expression=low))
            yield _comparison(exp.LTE(this=term.this, expression=high))
            return
    if isinstance(term, exp.In) and not term.args.get("query") and term.expressions:
        yield _membership(_expr(term.this), [_value(v) for v in term.expressions])
        return
    if isinstance(term, exp.Or):
        members = _or_equalities(term)
        if members is not None:
            yield _membership(*members)
            return
        yield " or ".join(sorted(" and ".join(_predicate(t)) for t in _disjuncts(term)))
        return
    if isinstance(term, exp.Binary) and isinstance(term, exp.Predicate):
        yield _comparison(term)
        return
    yield _expr(term)


def _disjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        yield from _disjuncts(node.this)
        yield from _disjuncts(node.expression)
    else:
        yield node


def _or_equalities(term: exp.Or) -> tuple[str, list[str]] | None:
    """``a = 1 OR a = 2`` as (``a``, [1, 2]); None when the OR is anything else."""
    column = None
    values = []
    for d in _disjuncts(term):
        if not isinstance(d, exp.EQ):
            return None
        sides = [d.this, d.expression]
        lits = [s for s in sides if literal_value(s) is not None]
        if len(lits) != 1:
            return None
        other = sides[0] if lits[0] is sides[1] else sides[1]
        name = _expr(other)
        if column not in (None, name):
            return None
        column = name
        values.append(_value(lits[0]))
    return (column, values) if column is not None else None


def _membership(column: str, values: list[str]) -> str:
    unique = sorted(set(values))
    if len(unique) == 1:
        return f"{column} = {unique[0]}"
    return f"{column} in ({', '.join(unique)})"


def _comparison(term: exp.Binary) -> str:
    left, right = term.this, term.expression
    kind: type[exp.Binary] = type(term)
    # The literal goes right; a symmetric comparison orders its sides.
    if literal_value(left) is not None and literal_value(right) is None:
        left, right = right, left
        kind = _MIRROR.get(kind, kind)
    a, b = _side(left), _side(right)
    number = _number_of(right)
    if kind in (exp.GT, exp.LT) and number is not None and number.is_integer():
        # Over integers x > 19 is x >= 20: the strict bound read as the inclusive one.
        b = str(int(number) + (1 if kind is exp.GT else -1))
        kind = exp.GTE if kind is exp.GT else exp.LTE
    if kind in _SYMMETRIC and literal_value(left) is None and literal_value(right) is None:
        a, b = sorted((a, b))
    op = render(kind(this=exp.column("a"), expression=exp.column("b"))).split()[1]
    if kind is exp.NullSafeEQ:
        op = "="
    return f"{a} {op.lower()} {b}"


def _side(node: exp.Expr) -> str:
    value = _value(node) if literal_value(node) is not None else None
    return value if value is not None else _expr(node)


def _value(node: exp.Expr) -> str:
    """A literal compared by value: '1' and 1 and 1.0 alike; strings keep their case."""
    value = literal_value(node)
    if value is None:
        return _expr(node)
    while isinstance(node, exp.Paren | exp.Cast):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        try:
            float(node.this)
        except ValueError:
            return repr(str(node.this))
    return value


def _expr(node: exp.Expr) -> str:
    return canon(node)


def _group_terms(select: exp.Select) -> list[exp.Expr]:
    group = select.args.get("group")
    if group is None:
        return []
    # GROUP BY 1 names the first projection.
    out = []
    for term in group.expressions:
        if isinstance(term, exp.Literal) and term.is_int:
            index = int(term.this) - 1
            if 0 <= index < len(select.expressions):
                out.append(select.expressions[index].unalias())
                continue
        out.append(term)
    return out


def _order_term(ordered: exp.Expr) -> str:
    desc = isinstance(ordered, exp.Ordered) and bool(ordered.args.get("desc"))
    term = ordered.this if isinstance(ordered, exp.Ordered) else ordered
    return f"{_expr(term)} {'desc' if desc else 'asc'}"


def _limit(limit: exp.Expr | None) -> str | None:
    if limit is None:
        return None
    value = limit.args.get("expression") or limit.this
    return _expr(value) if value is not None else None
