"""SQL spec stage: deterministic analysis of the agent's SQL with sqlglot (SPEC §2).

Never raises on bad SQL: text sqlglot cannot parse gives ``parsed=False`` and a parse error, and
its safety flags come from a keyword scan of the text with comments and strings removed.
"""

from __future__ import annotations

import re
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.models import Aggregation, OrderTerm, Predicate, SqlSpec
from stef.sql.predicates import (
    Clause,
    Pred,
    canon,
    conjuncts,
    is_literal,
    norm_ident,
    predicate_of,
)

MUTATING = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Grant,
    *(getattr(exp, name) for name in ("Revoke", "Execute", "Copy") if hasattr(exp, name)),
)
_REVOKE = getattr(exp, "Revoke", None)
MUTATING_KEYWORDS = (
    "insert",
    "update",
    "delete",
    "merge",
    "create",
    "drop",
    "alter",
    "truncate",
    "grant",
    "revoke",
    "replace",
    "upsert",
    "copy",
    "call",
    "exec",
    "execute",
)
_QUERY = (exp.Select, exp.SetOperation, exp.Subquery)
_PREDICATE_CLAUSES = (exp.Where, exp.Having, exp.Qualify)


# ---------------------------------------------------------------------------------- structure


def _inside_predicate(node: exp.Expr, root: exp.Expr) -> bool:
    """True when ``node`` sits inside a WHERE/HAVING/QUALIFY/ON condition of another query."""
    parent = node.parent
    while parent is not None and parent is not root:
        if isinstance(parent, _PREDICATE_CLAUSES):
            return True
        if isinstance(parent, exp.Join) and node is not parent.this:
            on = parent.args.get("on")
            if on is not None and _contains(on, node):
                return True
        parent = parent.parent
    return False


def _contains(haystack: exp.Expr, needle: exp.Expr) -> bool:
    return any(n is needle for n in haystack.walk())


def _main_select(tree: exp.Expr, ctes: dict[str, exp.Expr]) -> exp.Select | None:
    """The SELECT that produces the result: outermost, first branch of a set operation, and
    through ``SELECT * FROM (sub)`` wrappers."""
    node: exp.Expr | None = tree
    for _ in range(32):
        if isinstance(node, exp.Subquery):
            node = node.this
        elif isinstance(node, exp.SetOperation):
            node = node.left
        elif isinstance(node, exp.Select):
            projections = node.expressions
            if len(projections) == 1 and isinstance(projections[0], exp.Star):
                source = node.args.get("from_")
                inner = source.this if source is not None else None
                if isinstance(inner, exp.Subquery):
                    node = inner.this
                    continue
                if isinstance(inner, exp.Table) and norm_ident(inner.name) in ctes:
                    node = ctes[norm_ident(inner.name)]
                    continue
            return node
        else:
            return None
    return node if isinstance(node, exp.Select) else None


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


def _aggregations(queries: list[exp.Select]) -> list[Aggregation]:
    out: dict[tuple[str, str, bool], Aggregation] = {}
    for q in queries:
        for agg in q.find_all(exp.AggFunc):
            if agg.find_ancestor(exp.Window) is not None:
                continue
            if agg.find_ancestor(exp.Select) is not q:
                continue
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
            key = (func.upper(), column, distinct)
            out.setdefault(key, Aggregation(func=func.upper(), column=column, distinct=distinct))
    return list(out.values())


def _limit(node: exp.Expr) -> int | None:
    lim = node.args.get("limit")
    if lim is None:
        return None
    value = lim.args.get("expression") if isinstance(lim, exp.Limit | exp.Fetch) else lim
    if isinstance(lim, exp.Fetch):
        value = lim.args.get("count")
    if isinstance(value, exp.Literal) and value.is_int:
        return int(value.this)
    return None


def _statement_type(stmt: exp.Expr) -> str:
    if isinstance(stmt, _QUERY):
        return "select"
    if isinstance(stmt, exp.TruncateTable):
        return "truncate"
    if isinstance(stmt, exp.Command):
        return str(stmt.this).split()[0].casefold() if stmt.this else "command"
    return stmt.key


def _is_mutating(stmt: exp.Expr) -> bool:
    if isinstance(stmt, MUTATING) or (_REVOKE is not None and isinstance(stmt, _REVOKE)):
        return True
    if isinstance(stmt, exp.Command):
        return _statement_type(stmt) in MUTATING_KEYWORDS
    # A query can hide a write (Postgres data-modifying CTEs, SELECT ... INTO).
    return any(isinstance(n, MUTATING) for n in stmt.walk()) or stmt.args.get("into") is not None


# ---------------------------------------------------------------------------------- unparsed

_COMMENTS_AND_STRINGS = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`", re.S
)
_MUTATING_RE = re.compile(
    r"\b(insert\s+into|update\s+\S+\s+set|delete\s+from|merge\s+into|create\s|drop\s|alter\s|"
    r"truncate\s|grant\s|revoke\s)",
    re.I,
)


def _scan_unparsed(sql: str) -> tuple[bool, bool]:
    """(mutating, multiple statements) from the bare text, comments and strings blanked."""
    bare = _COMMENTS_AND_STRINGS.sub(" ", sql)
    statements = [s for s in bare.split(";") if s.strip()]
    return bool(_MUTATING_RE.search(bare)), len(statements) > 1


# ----------------------------------------------------------------------------------- the stage


def sqlspec(sql: str, dialect: str | None = None) -> SqlSpec:
    """Extract the SQL spec of ``sql`` parsed in ``dialect`` (None: sqlglot's generic dialect)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError, RecursionError, TypeError, AttributeError, KeyError) as exc:
        mutating, multiple = _scan_unparsed(sql)
        message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        return SqlSpec(
            parsed=False,
            parse_error=message,
            dialect=dialect,
            mutating=mutating,
            multiple_statements=multiple,
            statement_type="unknown",
        )
    if not statements:
        return SqlSpec(parsed=False, parse_error="no SQL statement", dialect=dialect)
    try:
        return _analyse(statements, dialect)
    except _NotAStatement as exc:
        mutating, multiple = _scan_unparsed(sql)
        return SqlSpec(
            parsed=False,
            parse_error=str(exc),
            dialect=dialect,
            mutating=mutating,
            multiple_statements=multiple or len(statements) > 1,
        )
    except (SqlglotError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        mutating, multiple = _scan_unparsed(sql)
        return SqlSpec(
            parsed=False,
            parse_error=f"analysis failed: {exc}"[:300],
            dialect=dialect,
            mutating=mutating or any(_is_mutating(s) for s in statements),
            multiple_statements=multiple or len(statements) > 1,
        )


def _unused_ctes(stmt: exp.Expr, ctes: dict[str, exp.Expr]) -> list[exp.Expr]:
    """Bodies of CTEs that nothing reads, directly or through other CTEs."""
    if not ctes:
        return []

    def reads(node: exp.Expr, skip: list[exp.Expr]) -> set[str]:
        names = set()
        for t in node.find_all(exp.Table):
            name = norm_ident(t.name)
            # A CTE read only inside a WHERE/HAVING subquery shapes a predicate, not the result.
            if (
                name in ctes
                and not any(_contains(b, t) for b in skip)
                and not (_inside_predicate(t, stmt))
            ):
                names.add(name)
        return names

    used = reads(stmt, list(ctes.values()))
    frontier = list(used)
    while frontier:
        name = frontier.pop()
        others = [b for n, b in ctes.items() if n != name]
        for nxt in reads(ctes[name], others) - used:
            used.add(nxt)
            frontier.append(nxt)
    return [b for n, b in ctes.items() if n not in used]


_OTHER_STATEMENTS = {
    "use",
    "set",
    "describe",
    "show",
    "pragma",
    "transaction",
    "commit",
    "rollback",
    "copy",
    "analyze",
    "cache",
    "uncache",
    "refresh",
    "kill",
    "comment",
    "loaddata",
    "export",
    "declare",
}


class _NotAStatement(ValueError):
    pass


def _is_statement(stmt: exp.Expr) -> bool:
    if isinstance(stmt, (*_QUERY, *MUTATING, exp.Command)):
        return True
    if _REVOKE is not None and isinstance(stmt, _REVOKE):
        return True
    return stmt.key in _OTHER_STATEMENTS


def _analyse(statements: list[exp.Expr], dialect: str | None) -> SqlSpec:
    stmt = statements[0]
    if not _is_statement(stmt):
        raise _NotAStatement(f"not a SQL statement: {stmt.sql()[:80]!r}")
    mutating = any(_is_mutating(s) for s in statements)
    multiple = len(statements) > 1
    statement_type = _statement_type(stmt)
    if isinstance(stmt, exp.Command):
        return SqlSpec(
            parsed=True,
            dialect=dialect,
            mutating=mutating,
            multiple_statements=multiple,
            statement_type=statement_type,
        )

    cte_nodes = {norm_ident(c.alias): c.this for c in stmt.find_all(exp.CTE)}
    selects = [s for s in stmt.find_all(exp.Select)]
    unused = _unused_ctes(stmt, cte_nodes)
    feeding = [
        s
        for s in selects
        if not _inside_predicate(s, stmt) and not any(_contains(body, s) for body in unused)
    ]

    preds: list[Pred] = []
    seen: set[tuple[str, str, str, str]] = set()
    where_count = having_count = 0
    has_join = False

    def add(p: Pred | None) -> None:
        if p is None:
            return
        k = (*p.key, p.clause)
        if k not in seen:
            seen.add(k)
            preds.append(p)

    for s in feeding:
        for clause_name, clause in (
            ("where", s.args.get("where")),
            ("having", s.args.get("having")),
            ("qualify", s.args.get("qualify")),
        ):
            if clause is None:
                continue
            for c in conjuncts(clause.this):
                p = predicate_of(c, dialect)
                if p is None:
                    has_join = True
                    continue
                p.clause = cast(Clause, clause_name)
                if clause_name == "having":
                    having_count += 1
                else:
                    where_count += 1
                add(p)
        for join in s.args.get("joins") or []:
            has_join = True
            on = join.args.get("on")
            if on is None:
                continue
            for c in conjuncts(on):
                if not any(is_literal(n) for n in c.walk() if isinstance(n, exp.Expr)):
                    continue
                p = predicate_of(c, dialect)
                if p is not None and p.values:
                    p.clause = "join"
                    add(p)

    main = _main_select(stmt, cte_nodes)
    projections: list[str] = []
    aggregated: list[bool] = []
    group_by: list[str] = []
    order_by: list[OrderTerm] = []
    distinct = False
    if main is not None:
        aliases = _alias_map(main)
        projections = [canon(p.this if isinstance(p, exp.Alias) else p) for p in main.expressions]
        aggregated = [
            any(a.find_ancestor(exp.Window) is None for a in p.find_all(exp.AggFunc))
            for p in main.expressions
        ]
        group = main.args.get("group")
        if group is not None:
            group_by = [_resolve(g, main, aliases) for g in group.expressions]
        distinct = main.args.get("distinct") is not None
        order_owner: exp.Expr = main
        if isinstance(stmt, exp.SetOperation) and stmt.args.get("order") is not None:
            order_owner = stmt
        order = order_owner.args.get("order")
        if order is not None:
            for o in order.expressions:
                term = o.this if isinstance(o, exp.Ordered) else o
                desc = bool(o.args.get("desc")) if isinstance(o, exp.Ordered) else False
                order_by.append(
                    OrderTerm(
                        expr=_resolve(term, main, aliases), direction="desc" if desc else "asc"
                    )
                )
    limit = _limit(stmt) if isinstance(stmt, exp.SetOperation) else None
    if limit is None and main is not None:
        limit = _limit(main)
        if limit is None and isinstance(stmt, exp.Select) and stmt is not main:
            limit = _limit(stmt)

    tables = list(
        dict.fromkeys(
            norm_ident(t.name)
            for t in stmt.find_all(exp.Table)
            if t.name and norm_ident(t.name) not in cte_nodes
        )
    )
    functions = sorted(
        {
            (f.sql_name() if isinstance(f, exp.Func) else type(f).__name__).upper()
            for f in stmt.find_all(exp.Func)
            if not isinstance(f, exp.Connector | exp.Binary)
        }
    )
    has_subquery = any(
        isinstance(s.parent, exp.Subquery) or _inside_predicate(s, stmt)
        for s in selects
        if s is not stmt
    ) or any(isinstance(n, exp.Subquery) for n in stmt.find_all(exp.Subquery))
    nested_where = any(
        _inside_predicate(s, stmt) and s.find_ancestor(*_PREDICATE_CLAUSES) for s in selects
    )
    negated = any(p.op.startswith("not") or p.op == "!=" for p in preds)

    filters = [
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
    return SqlSpec(
        projections=projections,
        projection_aggregated=aggregated,
        aggregations=_aggregations(feeding),
        filters=filters,
        group_by=group_by,
        order_by=order_by,
        limit=limit,
        tables=tables,
        ctes=list(cte_nodes),
        statement_type=statement_type,
        parsed=True,
        dialect=dialect,
        mutating=mutating,
        multiple_statements=multiple,
        distinct=distinct,
        has_join=has_join,
        has_subquery=has_subquery,
        has_nested_where=bool(nested_where),
        has_window=stmt.find(exp.Window) is not None,
        has_set_operation=stmt.find(exp.SetOperation) is not None,
        has_cte=bool(cte_nodes),
        select_count=len(selects),
        where_count=where_count,
        having_count=having_count,
        functions=functions,
        negated=negated,
    )
