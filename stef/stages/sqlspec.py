"""SQL spec stage: deterministic analysis of the agent's SQL with sqlglot (SPEC §2).

Never raises on bad SQL: text sqlglot cannot parse gives ``parsed=False`` and a parse error, and
its safety flags come from a keyword scan of the text with comments and strings removed. One
helper per part of the spec: filters, projections, aggregations, GROUP BY, ORDER BY, LIMIT,
tables and functions, structure flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.models import Aggregation, OrderTerm, Predicate, RankedTerm, SqlSpec
from stef.sql.canonical import canon, is_literal, norm_ident
from stef.sql.census import Census
from stef.sql.dialects import parse_sql
from stef.sql.joins import idle_joins, mismatched_keys
from stef.sql.predicates import Clause, Pred, conjuncts, predicate_of
from stef.sql.safety import is_mutating, is_statement, scan_unparsed, statement_type
from stef.sql.scope import Conditions, feeding_selects, main_select

_PREDICATE_CLAUSE_NAMES: tuple[Clause, ...] = ("where", "having", "qualify")


class _NotAStatement(ValueError):
    pass


# ------------------------------------------------------------------------------------ filters


@dataclass
class _Filters:
    """The predicates of the feeding SELECTs, deduplicated, with the clause counts."""

    preds: list[Pred] = field(default_factory=list)
    seen: set[tuple[str, str, str, str]] = field(default_factory=set)
    where_count: int = 0
    having_count: int = 0
    has_join: bool = False

    def add(self, p: Pred) -> None:
        key = (*p.key, p.clause)
        if key not in self.seen:
            self.seen.add(key)
            self.preds.append(p)


def _clause_predicates(s: exp.Select, dialect: str | None, out: _Filters) -> None:
    """WHERE, HAVING and QUALIFY conditions; a column = column condition counts as a join."""
    for clause_name in _PREDICATE_CLAUSE_NAMES:
        clause = s.args.get(clause_name)
        if clause is None:
            continue
        for c in conjuncts(clause.this):
            p = predicate_of(c, dialect)
            if p is None:
                out.has_join = True
                continue
            p.clause = clause_name
            if clause_name == "having":
                out.having_count += 1
            else:
                out.where_count += 1
            out.add(p)


def _join_predicates(s: exp.Select, dialect: str | None, out: _Filters) -> None:
    """Conditions of a JOIN's ON that compare with a literal: filters written in the join."""
    for join in s.args.get("joins") or []:
        out.has_join = True
        on = join.args.get("on")
        if on is None:
            continue
        for c in conjuncts(on):
            if not any(is_literal(n) for n in c.walk() if isinstance(n, exp.Expr)):
                continue
            p = predicate_of(c, dialect)
            if p is not None and p.values:
                p.clause = "join"
                out.add(p)


def _filters(feeding: list[exp.Select], dialect: str | None) -> _Filters:
    out = _Filters()
    for s in feeding:
        _clause_predicates(s, dialect, out)
        _join_predicates(s, dialect, out)
    return out


def _numbered(preds: list[Pred]) -> list[Predicate]:
    return [
        Predicate(
            id=i,
            lhs=p.lhs,
            op=p.op,
            rhs=p.rhs,
            text=p.text,
            clause=p.clause,
            columns=p.columns,
            values=p.values,
            wildcard=p.wildcard,
        )
        for i, p in enumerate(preds, start=1)
    ]


# ------------------------------------------------------------------ projections and grouping


def _alias_map(select: exp.Select) -> dict[str, exp.Expr]:
    return {norm_ident(p.alias): p.this for p in select.expressions if isinstance(p, exp.Alias)}


def _resolve(node: exp.Expr, select: exp.Select, aliases: dict[str, exp.Expr]) -> str:
    """Canonical text of a GROUP BY / ORDER BY term with positions and aliases resolved."""
    if isinstance(node, exp.Literal) and node.is_int:
        pos = int(node.this)
        if 1 <= pos <= len(select.expressions):
            proj = select.expressions[pos - 1]
            return canon(proj.this if isinstance(proj, exp.Alias) else proj)
    if isinstance(node, exp.Column) and not node.table and norm_ident(node.name) in aliases:
        return canon(aliases[norm_ident(node.name)])
    return canon(node)


def _projections(main: exp.Select | None) -> tuple[list[str], list[bool]]:
    """Each output column's canonical text, and whether it aggregates (outside a window)."""
    if main is None:
        return [], []
    projections = [canon(p.this if isinstance(p, exp.Alias) else p) for p in main.expressions]
    aggregated = [
        any(a.find_ancestor(exp.Window) is None for a in p.find_all(exp.AggFunc))
        for p in main.expressions
    ]
    return projections, aggregated


def _aggregation(agg: exp.AggFunc) -> Aggregation:
    arg = agg.this
    distinct = isinstance(arg, exp.Distinct)
    if distinct:
        inner = arg.expressions
        column = ", ".join(canon(e) for e in inner) if inner else "*"
    elif arg is None or isinstance(arg, exp.Star):
        column = "*"
    else:
        column = canon(arg)
    func = agg.sql_name() if hasattr(agg, "sql_name") else type(agg).__name__.upper()
    return Aggregation(func=func.upper(), column=column, distinct=distinct)


def _aggregations(census: Census, queries: list[exp.Select]) -> list[Aggregation]:
    """The aggregates each feeding SELECT computes itself (not in a window, not nested).

    The census tells each aggregate its own SELECT in its one walk: walking each feeding SELECT
    walked a nested one again at every level above it (nesting x size).
    """
    out: dict[tuple[str, str, bool], Aggregation] = {}
    for q in queries:
        for agg in census.aggregates.get(id(q), []):
            a = _aggregation(agg)
            out.setdefault((a.func, a.column, a.distinct), a)
    return list(out.values())


def _group_by(main: exp.Select | None) -> list[str]:
    group = main.args.get("group") if main is not None else None
    if main is None or group is None:
        return []
    aliases = _alias_map(main)
    return [_resolve(g, main, aliases) for g in group.expressions]


# --------------------------------------------------------------------------- ordering, limit


def _order_by(stmt: exp.Expr, main: exp.Select | None) -> list[OrderTerm]:
    """The result's ORDER BY: the set operation's when it has one, else the main SELECT's."""
    if main is None:
        return []
    owner: exp.Expr = main
    if isinstance(stmt, exp.SetOperation) and stmt.args.get("order") is not None:
        owner = stmt
    order = owner.args.get("order")
    if order is None:
        return []
    aliases = _alias_map(main)
    terms = []
    for o in order.expressions:
        term = o.this if isinstance(o, exp.Ordered) else o
        desc = bool(o.args.get("desc")) if isinstance(o, exp.Ordered) else False
        direction = "desc" if desc else "asc"
        terms.append(OrderTerm(expr=_resolve(term, main, aliases), direction=direction))
    return terms


def _limit_of(node: exp.Expr) -> int | None:
    """The integer LIMIT / FETCH FIRST of one query node, None if absent or not a literal."""
    lim = node.args.get("limit")
    if lim is None:
        return None
    value = lim.args.get("expression") if isinstance(lim, exp.Limit | exp.Fetch) else lim
    if isinstance(lim, exp.Fetch):
        value = lim.args.get("count")
    if isinstance(value, exp.Literal) and value.is_int:
        return int(value.this)
    return None


def _ranked(selects: Iterable[exp.Select]) -> list[RankedTerm]:
    """Every SELECT that keeps its first N rows by an ORDER BY, in any scope."""
    out = []
    for select in selects:
        order, limit = select.args.get("order"), _limit_of(select)
        if order is None or limit is None or not order.expressions:
            continue
        first = order.expressions[0]
        term = first.this if isinstance(first, exp.Ordered) else first
        desc = isinstance(first, exp.Ordered) and bool(first.args.get("desc"))
        out.append(RankedTerm(expr=canon(term), direction="desc" if desc else "asc", limit=limit))
    return out


def _limit(stmt: exp.Expr, main: exp.Select | None) -> int | None:
    """The result's LIMIT: the set operation's, else the main SELECT's, else the outer one's."""
    limit = _limit_of(stmt) if isinstance(stmt, exp.SetOperation) else None
    if limit is None and main is not None:
        limit = _limit_of(main)
        if limit is None and isinstance(stmt, exp.Select) and stmt is not main:
            limit = _limit_of(stmt)
    return limit


# ------------------------------------------------------------------------ tables, functions


def _tables(census: Census, ctes: dict[str, exp.Expr]) -> list[str]:
    """Physical tables read, in order of appearance; CTE names are not tables."""
    return list(
        dict.fromkeys(
            norm_ident(t.name) for t in census.tables if t.name and norm_ident(t.name) not in ctes
        )
    )


def _functions(census: Census) -> list[str]:
    """Names of the functions called, sorted; operators (AND, +) are not functions."""
    return sorted({f.sql_name().upper() for f in census.functions})


def _has_subquery(stmt: exp.Expr, census: Census) -> bool:
    conds = census.conditions
    return census.has_subquery_node or any(
        isinstance(s.parent, exp.Subquery) or conds.inside_predicate(s)
        for s in census.selects
        if s is not stmt
    )


def _has_nested_where(selects: list[exp.Select], conds: Conditions) -> bool:
    """A SELECT inside a WHERE / HAVING / QUALIFY condition (BADGER's nested query)."""
    return any(conds.inside_predicate(s) and conds.under_clause(s) for s in selects)


# ----------------------------------------------------------------------------------- the stage


_PARSE_ERRORS = (SqlglotError, ValueError, RecursionError, TypeError, AttributeError, KeyError)


def _parse(sql: str, dialect: str | None) -> list[exp.Expr] | str:
    """The statements of ``sql`` in ``dialect``, or the first line of the parse error."""
    try:
        statements = parse_sql(sql, dialect)
    except _PARSE_ERRORS as exc:
        return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return statements


_BACKTICKED_PATH = re.compile(r"`[^`.\s]+\.[^`\s]+`")


def guess_candidates(sql: str) -> list[str]:
    """The dialects to try, in order, when the generic dialect cannot parse SQL of no named
    dialect.

    Cheap text checks pick the first candidates. Backtick-quoted names are MySQL's (and
    SQLite's, which MySQL's parser reads alike), unless one pair of backticks quotes a dotted
    path (```project.dataset.table```), which is BigQuery's way and which MySQL would read as one
    name. ``[bracketed]`` names are T-SQL's. Postgres then Snowflake close the list: the generic
    dialect already reads most of their syntax (``::``, ILIKE, QUALIFY), so they rescue little,
    and Postgres is the more common engine. At most four extra parses, and only for SQL the
    generic dialect rejected.
    """
    candidates = []
    if "`" in sql:
        path = _BACKTICKED_PATH.search(sql) is not None
        candidates += ["bigquery", "mysql"] if path else ["mysql", "bigquery"]
    if "[" in sql:
        candidates.append("tsql")
    candidates += ["postgres", "snowflake"]
    return candidates[:4]


def sqlspec(sql: str, dialect: str | None = None, *, guess: bool = True) -> SqlSpec:
    """Extract the SQL spec of ``sql`` parsed in ``dialect``.

    Args:
        sql: the agent's SQL.
        dialect: the dialect the record or the app names; None for sqlglot's generic dialect.
        guess: with no dialect named, when the generic dialect cannot parse the SQL, try the
            dialects of :func:`guess_candidates` and keep the first that parses (reported with
            ``dialect_guessed``).
    """
    statements = _parse(sql, dialect)
    if isinstance(statements, str) and dialect is None and guess:
        for candidate in guess_candidates(sql):
            parsed = _parse(sql, candidate)
            if not isinstance(parsed, str) and parsed:
                spec = _spec_of(sql, parsed, candidate)
                if spec.parsed:
                    return spec.model_copy(update={"dialect_guessed": True})
    if isinstance(statements, str):
        return _unparsed(sql, dialect, statements)
    return _spec_of(sql, statements, dialect)


def _spec_of(sql: str, statements: list[exp.Expr], dialect: str | None) -> SqlSpec:
    if not statements:
        return SqlSpec(parsed=False, parse_error="no SQL statement", dialect=dialect)
    try:
        return _analyse(statements, dialect)
    except _NotAStatement as exc:
        return _unparsed(sql, dialect, str(exc), multiple=len(statements) > 1)
    except (SqlglotError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        # The text scan first: is_mutating walks the tree that may just have failed.
        mutating = scan_unparsed(sql)[0] or any(is_mutating(s) for s in statements)
        message = f"analysis failed: {exc}"[:300]
        return _unparsed(sql, dialect, message, mutating=mutating, multiple=len(statements) > 1)


def _unparsed(
    sql: str, dialect: str | None, error: str, *, mutating: bool = False, multiple: bool = False
) -> SqlSpec:
    """The spec of SQL that could not be analysed: the error and the text's safety flags."""
    text_mutating, text_multiple = scan_unparsed(sql)
    return SqlSpec(
        parsed=False,
        parse_error=error,
        dialect=dialect,
        mutating=text_mutating or mutating,
        multiple_statements=text_multiple or multiple,
        statement_type="unknown",
    )


def _analyse(statements: list[exp.Expr], dialect: str | None) -> SqlSpec:
    stmt = statements[0]
    if not is_statement(stmt):
        raise _NotAStatement(f"not a SQL statement: {stmt.sql()[:80]!r}")
    multiple = len(statements) > 1
    kind = statement_type(stmt)
    if isinstance(stmt, exp.Command):
        mutating = any(is_mutating(s) for s in statements)
        return SqlSpec(
            parsed=True,
            dialect=dialect,
            mutating=mutating,
            multiple_statements=multiple,
            statement_type=kind,
        )
    census = Census.of(stmt)
    mutating = is_mutating(stmt, nested_write=census.has_write) or any(
        is_mutating(s) for s in statements[1:]
    )
    return _query_spec(stmt, census, dialect, mutating=mutating, multiple=multiple, kind=kind)


def _query_spec(
    stmt: exp.Expr,
    census: Census,
    dialect: str | None,
    *,
    mutating: bool,
    multiple: bool,
    kind: str,
) -> SqlSpec:
    """The spec of a parsed query (or a write statement): its clauses and its structure."""
    ctes = {norm_ident(c.alias): c.this for c in census.ctes}
    selects = census.selects
    conds = census.conditions
    feeding = feeding_selects(stmt, selects, ctes, conds)
    filters = _filters(feeding, dialect)
    main = main_select(stmt, ctes)
    projections, aggregated = _projections(main)
    return SqlSpec(
        projections=projections,
        projection_aggregated=aggregated,
        aggregations=_aggregations(census, feeding),
        filters=_numbered(filters.preds),
        group_by=_group_by(main),
        order_by=_order_by(stmt, main),
        limit=_limit(stmt, main),
        tables=_tables(census, ctes),
        ctes=list(ctes),
        statement_type=kind,
        parsed=True,
        dialect=dialect,
        mutating=mutating,
        multiple_statements=multiple,
        distinct=main is not None and main.args.get("distinct") is not None,
        has_join=filters.has_join,
        has_subquery=_has_subquery(stmt, census),
        has_nested_where=_has_nested_where(selects, conds),
        has_window=census.has_window,
        has_set_operation=census.has_set_operation,
        has_cte=bool(ctes),
        select_count=len(selects),
        where_count=filters.where_count,
        having_count=filters.having_count,
        functions=_functions(census),
        negated=any(p.op.startswith("not") or p.op == "!=" for p in filters.preds),
        ranked=_ranked(selects),
        idle_joins=idle_joins(stmt),
        mismatched_keys=mismatched_keys(stmt),
    )
