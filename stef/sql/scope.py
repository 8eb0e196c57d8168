"""Query scopes: which SELECTs of a statement shape its result.

A SELECT inside a WHERE/HAVING/ON condition shapes a predicate, not the result; a CTE nothing
reads shapes nothing; ``SELECT * FROM (sub)`` passes the inner SELECT's result through.
"""

from __future__ import annotations

from sqlglot import exp

from stef.sql.canonical import norm_ident

PREDICATE_CLAUSES = (exp.Where, exp.Having, exp.Qualify)
# Deeper nesting of pass-through wrappers than this is not worth following.
_MAX_WRAPPERS = 32


def contains(haystack: exp.Expr, needle: exp.Expr) -> bool:
    """Whether ``needle`` (this very node, not an equal one) is under ``haystack``."""
    return any(n is needle for n in haystack.walk())


def inside_predicate(node: exp.Expr, root: exp.Expr) -> bool:
    """True when ``node`` sits inside a WHERE/HAVING/QUALIFY/ON condition of another query."""
    parent = node.parent
    while parent is not None and parent is not root:
        if isinstance(parent, PREDICATE_CLAUSES):
            return True
        if isinstance(parent, exp.Join) and node is not parent.this:
            on = parent.args.get("on")
            if on is not None and contains(on, node):
                return True
        parent = parent.parent
    return False


def cte_bodies(stmt: exp.Expr) -> dict[str, exp.Expr]:
    """Every CTE of the statement: folded name -> body, in order."""
    return {norm_ident(c.alias): c.this for c in stmt.find_all(exp.CTE)}


def _star_source(select: exp.Select, ctes: dict[str, exp.Expr]) -> exp.Expr | None:
    """The query a ``SELECT * FROM (sub)`` or ``SELECT * FROM cte`` passes through, if any."""
    projections = select.expressions
    if len(projections) != 1 or not isinstance(projections[0], exp.Star):
        return None
    source = select.args.get("from_")
    inner = source.this if source is not None else None
    if isinstance(inner, exp.Subquery):
        return inner.this  # type: ignore[no-any-return]
    if isinstance(inner, exp.Table) and norm_ident(inner.name) in ctes:
        return ctes[norm_ident(inner.name)]
    return None


def main_select(tree: exp.Expr, ctes: dict[str, exp.Expr]) -> exp.Select | None:
    """The SELECT that produces the result: outermost, first branch of a set operation, and
    through ``SELECT * FROM (sub)`` wrappers."""
    node: exp.Expr | None = tree
    for _ in range(_MAX_WRAPPERS):
        if isinstance(node, exp.Subquery):
            node = node.this
        elif isinstance(node, exp.SetOperation):
            node = node.left
        elif isinstance(node, exp.Select):
            inner = _star_source(node, ctes)
            if inner is None:
                return node
            node = inner
        else:
            return None
    return node if isinstance(node, exp.Select) else None


def unused_ctes(stmt: exp.Expr, ctes: dict[str, exp.Expr]) -> list[exp.Expr]:
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
                and not any(contains(b, t) for b in skip)
                and not (inside_predicate(t, stmt))
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


def feeding_selects(
    stmt: exp.Expr, selects: list[exp.Select], ctes: dict[str, exp.Expr]
) -> list[exp.Select]:
    """The SELECTs whose clauses shape the result: not in a predicate, not in an unused CTE."""
    unused = unused_ctes(stmt, ctes)
    return [
        s
        for s in selects
        if not inside_predicate(s, stmt) and not any(contains(body, s) for body in unused)
    ]
