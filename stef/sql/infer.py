"""The part of a schema that two queries read, inferred from the queries alone (reference mode's
generated databases, :mod:`stef.sql.gendb`).

Each query is walked scope by scope (sqlglot's scopes: CTEs, derived tables and subqueries
apart). A qualified column belongs to the table its qualifier names in its scope or an outer one;
an unqualified column to the one table of its scope, else to the table of that scope that either
query places it in, else to the first table of the scope. A column's kind comes from its use:
compared with a number (``int``/``real``), with a string (``text``, or ``date`` when the string
reads ``YYYY-MM-DD`` or a date function reads the column), summed or used in arithmetic
(``real``); a join equality gives its two columns one kind and one shared domain. The literals a
column is compared with, and the LIKE patterns it is matched against, are kept: the generated
values are drawn around them; so is whether it is tested with ``IS NULL`` (``nullable``) and
grouped or counted distinct (``grouped``).

Pure: no I/O; a query sqlglot cannot read gives :class:`InferenceError`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from stef.errors import StefError
from stef.sql.dialects import parse_sql
from stef.sql.suite_dates import constant_date, constant_year, reads_now

Kind = str  # "int" | "real" | "text" | "date"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
# The most years an age compares (``STRFTIME('%Y', 'now') - STRFTIME('%Y', d) > 50``).
_MAX_YEARS_APART = 150
# The largest count compared with that the generated databases give a group enough rows for.
MAX_COUNTED = 30
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
_NUMERIC_FUNCS = (exp.Sum, exp.Avg, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Abs, exp.Round)
_DATE_FUNCS = ("strftime", "date", "datetime", "julianday", "year", "month", "timestrtotime")
_DATE_NODES = (
    exp.Extract,
    exp.TimeToStr,
    exp.Year,
    exp.Month,
    exp.Day,
    exp.DateDiff,
    exp.StrToTime,
    exp.TimestampTrunc,
    exp.DateTrunc,
    exp.DateAdd,
    exp.DateSub,
)
# What makes an expression a date: compared with one, a column holds dates.
_DATE_VALUES = (
    exp.CurrentDate,
    exp.CurrentTimestamp,
    exp.Interval,
    exp.DateAdd,
    exp.DateSub,
    exp.TimestampTrunc,
    exp.DateTrunc,
)


class InferenceError(StefError):
    """The queries cannot be read well enough to build a schema for them."""


@dataclass
class ColumnFacts:
    """What the queries say about one column."""

    kinds: set[Kind] = field(default_factory=set)
    literals: set[object] = field(default_factory=set)
    patterns: set[str] = field(default_factory=set)
    years: set[int] = field(default_factory=set)
    ranked: bool = False
    nullable: bool = False
    grouped: bool = False
    group_by: bool = False
    boolean: bool = False


@dataclass
class Schema:
    """Tables (in first-use order) with their columns' facts, and the join links between
    columns as ``((table, column), (table, column))`` pairs."""

    tables: dict[str, dict[str, ColumnFacts]] = field(default_factory=dict)
    links: list[tuple[tuple[str, str], tuple[str, str]]] = field(default_factory=list)
    limit: int = 0
    # The numbers up to ``MAX_COUNTED`` a count is compared with (``HAVING COUNT(*) > 5``; a
    # count's alias: ``WHERE t.num > 5``), and the most times one query reads each table.
    counts: set[int] = field(default_factory=set)
    reads: dict[str, int] = field(default_factory=dict)
    # Whether a query reads columns it does not name (``*``, ``NATURAL JOIN``, ``USING``).
    unnamed: bool = False

    def column(self, table: str, name: str) -> ColumnFacts:
        return self.tables.setdefault(table, {}).setdefault(name, ColumnFacts())


@dataclass
class _Pending:
    """An unqualified column of a scope with several tables: placed after both queries."""

    node: exp.Column
    candidates: list[str]


def parse_one(sql: str, dialect: str | None) -> exp.Query:
    """``sql`` as one query tree.

    Raises:
        InferenceError: it does not parse to exactly one query.
    """
    try:
        trees = parse_sql(sql, dialect)
    except (SqlglotError, RecursionError, ValueError) as exc:
        raise InferenceError(f"does not parse: {type(exc).__name__}") from exc
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise InferenceError("not one query")
    return trees[0]


def infer_schema(trees: list[exp.Query]) -> tuple[Schema, dict[int, tuple[str, str]]]:
    """The schema ``trees`` read, and where each column node was placed (by ``id``).

    Raises:
        InferenceError: a scope cannot be built, or a query reads no table.
    """
    schema = Schema()
    placed: dict[int, tuple[str, str]] = {}
    pending: list[_Pending] = []
    for tree in trees:
        try:
            scopes = traverse_scope(tree)
        except (SqlglotError, RecursionError, ValueError, KeyError) as exc:
            raise InferenceError(f"no scopes: {type(exc).__name__}") from exc
        if not any(_tables_of(s) for s in scopes):
            raise InferenceError("reads no table")
        for scope in scopes:
            for table in _tables_of(scope).values():
                schema.tables.setdefault(table, {})
            _place_scope(scope, schema, placed, pending)
    for item in pending:
        known = [t for t in item.candidates if item.node.name.casefold() in schema.tables[t]]
        table = (known or item.candidates)[0]
        schema.column(table, item.node.name.casefold())
        placed[id(item.node)] = (table, item.node.name.casefold())
    for tree in trees:
        _read_facts(tree, schema, placed)
        _read_query(tree, schema)
    return schema, placed


def _read_query(tree: exp.Query, schema: Schema) -> None:
    """What one query says beyond its columns: its largest LIMIT, the numbers its counts are
    compared with, how many times it reads each table."""
    for limit in tree.find_all(exp.Limit):
        value = limit.args.get("expression")
        if isinstance(value, exp.Literal) and value.is_int:
            schema.limit = max(schema.limit, int(value.this))
    schema.counts |= _counts(tree)
    joins = list(tree.find_all(exp.Join))
    schema.unnamed = (
        schema.unnamed
        or any(not isinstance(s.parent, exp.Count) for s in tree.find_all(exp.Star))
        or any(j.args.get("using") or j.method.casefold() == "natural" for j in joins)
    )
    tables = Counter(t.name.casefold() for t in tree.find_all(exp.Table) if t.name)
    for table, reads in tables.items():
        schema.reads[table] = max(schema.reads.get(table, 0), reads)


def _rows_counted(node: exp.Expr) -> bool:
    """Whether ``node`` counts rows (``COUNT(*)``, ``COUNT(x)``), not distinct values."""
    return isinstance(node, exp.Count) and not isinstance(node.this, exp.Distinct)


def _counts(tree: exp.Query) -> set[int]:
    """The numbers from 1 to ``MAX_COUNTED`` that a count is compared with in ``tree``
    (``COUNT(x) > 5``, ``5 <= COUNT(*)``, or a column named as a count's alias). A count of
    distinct values is left out: a group of rows sharing one value counts 1."""
    aliases = {a.alias.casefold() for a in tree.find_all(exp.Alias) if _rows_counted(a.this)}
    found = set()
    for node in tree.find_all(*_COMPARISONS):
        for side, other in ((node.this, node.expression), (node.expression, node.this)):
            counts = _rows_counted(side) or (
                isinstance(side, exp.Column) and side.name.casefold() in aliases
            )
            if counts and isinstance(other, exp.Literal) and other.is_int:
                number = int(other.this)
                if 0 < number <= MAX_COUNTED:
                    found.add(number)
    return found


def _tables_of(scope: Scope) -> dict[str, str]:
    """Alias (or name) -> physical table name, for the physical tables of ``scope``."""
    return {
        alias.casefold(): source.name.casefold()
        for alias, source in scope.sources.items()
        if isinstance(source, exp.Table) and source.name
    }


def _place_scope(
    scope: Scope,
    schema: Schema,
    placed: dict[int, tuple[str, str]],
    pending: list[_Pending],
) -> None:
    select = scope.expression
    aliases = (
        {p.alias.casefold() for p in select.expressions if isinstance(p, exp.Alias)}
        if isinstance(select, exp.Select)
        else set()
    )
    columns = list(scope.columns)
    qualify = select.args.get("qualify") if isinstance(select, exp.Select) else None
    if qualify is not None:
        # sqlglot's scope leaves out a QUALIFY window's PARTITION BY columns.
        known = {id(c) for c in columns}
        columns += [c for c in qualify.find_all(exp.Column) if id(c) not in known]
    for column in columns:
        if column.parent_select is not select and not column.table:
            continue
        name = column.name.casefold()
        if not name or isinstance(column.this, exp.Star):
            continue
        if column.table:
            _place_qualified(scope, column, name, schema, placed)
        elif name not in aliases:
            _place_unqualified(scope, column, name, schema, placed, pending)


def _place_qualified(
    scope: Scope,
    column: exp.Column,
    name: str,
    schema: Schema,
    placed: dict[int, tuple[str, str]],
) -> None:
    """``alias.name``: the physical table the alias names, or the column behind a derived
    table's projection."""
    table = _qualified_table(scope, column.table.casefold())
    if table is not None:
        schema.column(table, name)
        placed[id(column)] = (table, name)
        return
    inner = _through_derived(scope, column.table.casefold(), name, placed)
    if inner is not None:
        placed[id(column)] = inner


def _place_unqualified(
    scope: Scope,
    column: exp.Column,
    name: str,
    schema: Schema,
    placed: dict[int, tuple[str, str]],
    pending: list[_Pending],
) -> None:
    """A bare column: the one table of its scope, the column behind the one derived source,
    or pending (placed after both queries) among the scope's tables."""
    tables = _tables_of(scope)
    if not tables:
        only = list(scope.sources)
        inner = (
            _through_derived(scope, only[0].casefold(), name, placed) if len(only) == 1 else None
        )
        if inner is not None:
            placed[id(column)] = inner
        return
    if any(not isinstance(s, exp.Table) for s in scope.sources.values()):
        return
    candidates = list(dict.fromkeys(tables.values()))
    if len(candidates) == 1:
        schema.column(candidates[0], name)
        placed[id(column)] = (candidates[0], name)
    else:
        pending.append(_Pending(column, candidates))


def _through_derived(
    scope: Scope, qualifier: str, name: str, placed: dict[int, tuple[str, str]]
) -> tuple[str, str] | None:
    """The physical column behind ``qualifier.name`` when ``qualifier`` is a derived table or
    CTE of ``scope`` whose projection ``name`` is a plain column already placed (inner scopes
    come first): ``T3.nationality = 'Dutch'`` over ``(SELECT T1.nationality FROM drivers T1)``
    says what ``drivers.nationality`` holds."""
    for alias, source in scope.sources.items():
        if alias.casefold() != qualifier or not isinstance(source, Scope):
            continue
        inner = source.expression
        if not isinstance(inner, exp.Select):
            return None
        for projection in inner.expressions:
            if projection.alias_or_name.casefold() != name:
                continue
            node = projection.this if isinstance(projection, exp.Alias) else projection
            return placed.get(id(node)) if isinstance(node, exp.Column) else None
    return None


def _qualified_table(scope: Scope | None, qualifier: str) -> str | None:
    """The physical table ``qualifier`` names in ``scope`` or an outer one (None: a derived
    table or CTE, whose columns are not physical)."""
    while scope is not None:
        for alias, source in scope.sources.items():
            if alias.casefold() == qualifier:
                return source.name.casefold() if isinstance(source, exp.Table) else None
        scope = scope.parent
    return None


# ------------------------------------------------------------------------------- kinds, values


def _read_facts(tree: exp.Query, schema: Schema, placed: dict[int, tuple[str, str]]) -> None:
    for column in tree.find_all(exp.Column):
        where = placed.get(id(column)) or _by_name(schema, column)
        if where is None:
            continue
        facts = schema.column(*where)
        _facts_from_use(column, facts, schema, where, placed)


def _by_name(schema: Schema, column: exp.Column) -> tuple[str, str] | None:
    """An unplaced column (``ORDER BY name`` naming an output) by its name, when exactly one
    table has a column of that name."""
    name = column.name.casefold()
    owners = [t for t, columns in schema.tables.items() if name in columns]
    return (owners[0], name) if len(owners) == 1 and not column.table else None


def _facts_from_use(
    column: exp.Column,
    facts: ColumnFacts,
    schema: Schema,
    where: tuple[str, str],
    placed: dict[int, tuple[str, str]],
) -> None:
    node, parent, wrapped_date = _climb(column, facts)
    _flags_from_parent(parent, facts, wrapped_date)
    bare = node is column or (isinstance(node, exp.Paren) and node.unnest() is column)
    if bare and isinstance(parent, exp.Where | exp.Having | exp.And | exp.Or | exp.Not):
        _boolean(facts)  # a predicate by itself: ``WHERE active``, ``NOT deleted``
    compared: list[exp.Expr] = []
    if isinstance(parent, _COMPARISONS):
        compared.append(parent.expression if parent.this is node else parent.this)
    if isinstance(parent, exp.In):
        compared.extend(parent.expressions)
        compared.extend(_subquery_column(parent.args.get("query")))
    if isinstance(parent, exp.Between):
        bounds = (parent.args.get(key) for key in ("low", "high"))
        compared.extend(b for b in bounds if b is not None and b is not node)
    for other in compared:
        _compared_with(other, facts, wrapped_date, schema, where, placed)
    if wrapped_date and isinstance(parent, exp.Sub):
        _years_apart(node, parent, facts)


def _years_apart(node: exp.Expr, parent: exp.Sub, facts: ColumnFacts) -> None:
    """``STRFTIME('%Y', 'now') - STRFTIME('%Y', birthday) > 50`` (an age): the column's years
    are the year the other side gives ("now" pinned, :data:`NOW`) less the number (plus it,
    the column's year being the one subtracted from)."""
    other = parent.expression if parent.this is node else parent.this
    outer: exp.Expr = parent
    while isinstance(outer.parent, exp.Paren):
        outer = outer.parent
    comparison = outer.parent
    if not isinstance(comparison, _COMPARISONS):
        return
    number = comparison.expression if comparison.this is outer else comparison.this
    if not (isinstance(number, exp.Literal) and not number.is_string):
        return
    year = constant_year(other)
    years = float(str(number.this))
    if year is None or not (years.is_integer() and 0 <= years <= _MAX_YEARS_APART):
        return
    facts.years.add(year - int(years) if parent.expression is node else year + int(years))


def _subquery_column(query: exp.Expr | None) -> list[exp.Expr]:
    """The one column a subquery selects (``x IN (SELECT y FROM t)``: ``x`` and ``y`` share a
    domain, as a join's columns do); nothing for any other subquery."""
    while isinstance(query, exp.Subquery | exp.Paren):
        query = query.this
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return []
    only = query.expressions[0]
    only = only.this if isinstance(only, exp.Alias) else only
    return [only] if isinstance(only, exp.Column) else []


def _climb(column: exp.Column, facts: ColumnFacts) -> tuple[exp.Expr, exp.Expr | None, bool]:
    """Up through the functions that wrap the column (STRFTIME('%Y', d), LOWER(c), CAST): the
    outermost of them, its parent, and whether a date function is among them."""
    node: exp.Expr = column
    wrapped_date = False
    parent = node.parent
    while isinstance(parent, exp.Func | exp.Paren) and not isinstance(
        parent, exp.AggFunc | exp.Connector
    ):
        if _is_date_func(parent):
            wrapped_date = True
        if isinstance(parent, _NUMERIC_FUNCS):
            facts.kinds.add("int")
        node, parent = parent, parent.parent
    return node, parent, wrapped_date


def _flags_from_parent(parent: exp.Expr | None, facts: ColumnFacts, wrapped_date: bool) -> None:
    """What the node a column (in its functions) sits in says: ranked, nullable, grouped,
    numeric, a date, a LIKE pattern."""
    if isinstance(parent, exp.Ordered | exp.Max | exp.Min):
        facts.ranked = True
    if isinstance(parent, exp.Is):
        facts.nullable = True
    if isinstance(parent, exp.Group | exp.Distinct):
        facts.grouped = True
    if isinstance(parent, exp.Group):
        facts.group_by = True
    if isinstance(parent, exp.Sum | exp.Avg):
        facts.kinds.add("int")
    if wrapped_date:
        facts.kinds.add("date")
    if isinstance(parent, exp.Binary) and isinstance(parent, _NUMERIC_FUNCS):
        facts.kinds.add("int")
    if isinstance(parent, exp.Like | exp.ILike):
        pattern = parent.expression
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            facts.patterns.add(str(pattern.this))
            facts.kinds.add("text")


def _is_date_func(node: exp.Expr) -> bool:
    if isinstance(node, _DATE_NODES):
        return True
    name = node.name.casefold() if isinstance(node, exp.Anonymous) else ""
    sql_name = node.sql_name().casefold() if isinstance(node, exp.Func) else ""
    return name in _DATE_FUNCS or sql_name in _DATE_FUNCS


def _compared_with(
    other: exp.Expr,
    facts: ColumnFacts,
    wrapped_date: bool,
    schema: Schema,
    where: tuple[str, str],
    placed: dict[int, tuple[str, str]],
) -> None:
    while isinstance(other, exp.Paren | exp.Cast):
        other = other.this
    if isinstance(other, exp.Neg) and isinstance(other.this, exp.Literal):
        other = exp.Literal.number(f"-{other.this.this}")
    if isinstance(other, exp.Column):
        target = placed.get(id(other))
        if target is not None and target != where:
            schema.links.append((where, target))
    elif isinstance(other, exp.Boolean):
        _boolean(facts)
    elif isinstance(other, exp.Literal) and not other.is_string:
        _compared_with_number(float(str(other.this)), facts, wrapped_date)
    elif isinstance(other, exp.Literal):
        _compared_with_string(str(other.this), facts, wrapped_date)
    else:
        _compared_with_date_expression(other, facts)


def _boolean(facts: ColumnFacts) -> None:
    """A boolean column: 0 or 1, as SQLite stores TRUE and FALSE."""
    facts.boolean = True
    facts.kinds.add("int")
    facts.literals |= {0, 1}


def _compared_with_date_expression(other: exp.Expr, facts: ColumnFacts) -> None:
    """``d >= CURRENT_DATE - INTERVAL '7 days'``, ``d < DATEADD(day, 1, '2020-06-15')``: the
    column holds dates, and the dates named inside are its values' centres."""
    if other.find(*_DATE_VALUES) is None and not reads_now(other):
        return
    facts.kinds.add("date")
    folded = constant_date(other)
    if folded is not None:
        facts.literals.add(folded[:10])
    for literal in other.find_all(exp.Literal):
        if literal.is_string and _DATE.match(str(literal.this)):
            facts.literals.add(str(literal.this))


def _compared_with_number(number: float, facts: ColumnFacts, wrapped_date: bool) -> None:
    if wrapped_date and number.is_integer() and 1000 <= number <= 9999:
        facts.years.add(int(number))
        return
    facts.kinds.add("int" if number.is_integer() else "real")
    facts.literals.add(int(number) if number.is_integer() else number)


def _compared_with_string(text: str, facts: ColumnFacts, wrapped_date: bool) -> None:
    if wrapped_date:
        if re.fullmatch(r"\d{4}", text):
            facts.years.add(int(text))
        elif _DATE.match(text):
            facts.literals.add(text)
        return
    facts.kinds.add("date" if _DATE.match(text) else "text")
    facts.literals.add(text)
