"""Query scopes: which SELECTs of a statement shape its result.

A SELECT inside a WHERE/HAVING/ON condition shapes a predicate, not the result; a CTE nothing
reads shapes nothing; ``SELECT * FROM (sub)`` passes the inner SELECT's result through.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from stef.sql.canonical import norm_ident

PREDICATE_CLAUSES = (exp.Where, exp.Having, exp.Qualify)
# Deeper nesting of pass-through wrappers than this is not worth following.
_MAX_WRAPPERS = 32


@dataclass(frozen=True)
class Conditions:
    """Which nodes of a statement sit inside a condition, by ``id``, read in one walk.

    Asking it of each node by climbing to the root costs the depth of the tree per node:
    quadratic on a chain of a thousand UNIONs, whose tree is a thousand levels deep.

    Attributes:
        in_condition: nodes inside a WHERE/HAVING/QUALIFY/ON condition of a query below the root.
        in_clause: nodes with a WHERE/HAVING/QUALIFY clause above them.
    """

    in_condition: frozenset[int]
    in_clause: frozenset[int]

    def inside_predicate(self, node: exp.Expr) -> bool:
        """True when ``node`` sits inside a WHERE/HAVING/QUALIFY/ON condition of another
        query (one below the root)."""
        return id(node) in self.in_condition

    def under_clause(self, node: exp.Expr) -> bool:
        """True when a WHERE/HAVING/QUALIFY clause is above ``node``."""
        return id(node) in self.in_clause


def conditions(root: exp.Expr) -> Conditions:
    """The :class:`Conditions` of the tree under ``root``: parents are walked before children,
    so each node inherits its parent's answer."""
    in_condition: set[int] = set()
    in_clause: set[int] = set()
    if root.find_ancestor(*PREDICATE_CLAUSES) is not None:
        in_clause.add(id(root))
    for node in root.walk():
        parent = node.parent
        if node is root or parent is None:
            continue
        clause = isinstance(parent, PREDICATE_CLAUSES)
        if clause or id(parent) in in_clause:
            in_clause.add(id(node))
        # The root's own clauses do not count: they shape the result, not another query.
        if parent is not root and (
            clause
            or id(parent) in in_condition
            or (isinstance(parent, exp.Join) and node is parent.args.get("on"))
        ):
            in_condition.add(id(node))
    return Conditions(frozenset(in_condition), frozenset(in_clause))


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
    stmt: exp.Expr,
    ctes: dict[str, exp.Expr],
    bodies_of: dict[int, list[int]],
    conds: Conditions,
) -> list[exp.Expr]:
    """Bodies of CTEs that nothing reads, directly or through other CTEs (``bodies_of`` from
    :func:`enclosing_bodies`, ``conds`` from :func:`conditions` of ``stmt``)."""

    def reads(node: exp.Expr, skip: set[int]) -> set[str]:
        names = set()
        for t in node.find_all(exp.Table):
            name = norm_ident(t.name)
            # A CTE read only inside a WHERE/HAVING subquery shapes a predicate, not the result.
            if (
                name in ctes
                and not any(b in skip for b in bodies_of.get(id(t), ()))
                and not conds.inside_predicate(t)
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
    stmt: exp.Expr, selects: list[exp.Select], ctes: dict[str, exp.Expr], conds: Conditions
) -> list[exp.Select]:
    """The SELECTs whose clauses shape the result: not in a predicate, not in an unused CTE
    (``conds`` from :func:`conditions` of ``stmt``)."""
    bodies_of = enclosing_bodies(ctes)
    unused = {id(b) for b in unused_ctes(stmt, ctes, bodies_of, conds)} if ctes else set()
    return [
        s
        for s in selects
        if not conds.inside_predicate(s) and not any(b in unused for b in bodies_of.get(id(s), ()))
    ]
