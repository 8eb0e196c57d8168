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


def inside_predicate(node: exp.Expr, root: exp.Expr) -> bool:
    """True when ``node`` sits inside a WHERE/HAVING/QUALIFY/ON condition of another query."""
    child, parent = node, node.parent
    while parent is not None and parent is not root:
        if isinstance(parent, PREDICATE_CLAUSES):
            return True
        # The path up from node enters a join through its ON exactly when node is under the ON:
        # no walk of the condition needed.
        if isinstance(parent, exp.Join) and child is parent.args.get("on"):
            return True
        child, parent = parent, parent.parent
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


def enclosing_bodies(ctes: dict[str, exp.Expr]) -> dict[int, list[int]]:
    """id of each node under a CTE body -> ids of the bodies it is under (itself included).

    One walk per body: asking of each table whether it lies in each body walked the body again
    per table (tables x CTE size on a chain of wide CTEs).
    """
    bodies_of: dict[int, list[int]] = {}
    for body in ctes.values():
        for n in body.walk():
            bodies_of.setdefault(id(n), []).append(id(body))
    return bodies_of


def unused_ctes(
    stmt: exp.Expr, ctes: dict[str, exp.Expr], bodies_of: dict[int, list[int]]
) -> list[exp.Expr]:
    """Bodies of CTEs that nothing reads, directly or through other CTEs (``bodies_of`` from
    :func:`enclosing_bodies`)."""

    def reads(node: exp.Expr, skip: set[int]) -> set[str]:
        names = set()
        for t in node.find_all(exp.Table):
            name = norm_ident(t.name)
            # A CTE read only inside a WHERE/HAVING subquery shapes a predicate, not the result.
            if (
                name in ctes
                and not any(b in skip for b in bodies_of.get(id(t), ()))
                and not inside_predicate(t, stmt)
            ):
                names.add(name)
        return names

    used = reads(stmt, {id(b) for b in ctes.values()})
    frontier = list(used)
    while frontier:
        name = frontier.pop()
        others = {id(b) for n, b in ctes.items() if n != name}
        for nxt in reads(ctes[name], others) - used:
            used.add(nxt)
            frontier.append(nxt)
    return [b for n, b in ctes.items() if n not in used]


def feeding_selects(
    stmt: exp.Expr, selects: list[exp.Select], ctes: dict[str, exp.Expr]
) -> list[exp.Select]:
    """The SELECTs whose clauses shape the result: not in a predicate, not in an unused CTE."""
    bodies_of = enclosing_bodies(ctes)
    unused = {id(b) for b in unused_ctes(stmt, ctes, bodies_of)} if ctes else set()
    return [
        s
        for s in selects
        if not inside_predicate(s, stmt) and not any(b in unused for b in bodies_of.get(id(s), ()))
    ]
