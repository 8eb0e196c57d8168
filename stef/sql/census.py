"""One walk of a parsed statement that collects what the SQL spec reads of the whole tree.

The spec used to walk the tree once per question (the SELECTs, the tables, the functions, the
aggregates and their SELECT, the conditions, windows, set operations, subqueries, nested
writes): a dozen walks per record. :meth:`Census.of` walks it once, breadth first as sqlglot's
``find_all`` does, so every list keeps the order ``find_all`` gave.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import cast

from sqlglot import exp

from stef.sql.dialects import drop_positions
from stef.sql.safety import MUTATING
from stef.sql.scope import PREDICATE_CLAUSES, Conditions


@dataclass
class Census:
    """What one walk of a statement found, in ``find_all`` (breadth-first) order.

    Attributes:
        selects: every SELECT, the root included.
        tables: every table reference.
        functions: every function call (operators such as AND or + excluded).
        ctes: every CTE node.
        aggregates: id of a SELECT -> the aggregates it computes itself (not inside a window,
            not inside a nested SELECT).
        conditions: which nodes sit inside a condition (see :class:`Conditions`).
        has_window: a window function somewhere.
        has_set_operation: a UNION / INTERSECT / EXCEPT somewhere.
        has_subquery_node: a parenthesized subquery somewhere.
        has_write: a node that writes (INSERT, UPDATE, ... nested in a CTE or the root).
    """

    selects: list[exp.Select] = field(default_factory=list)
    tables: list[exp.Table] = field(default_factory=list)
    functions: list[exp.Func] = field(default_factory=list)
    ctes: list[exp.CTE] = field(default_factory=list)
    aggregates: dict[int, list[exp.AggFunc]] = field(default_factory=dict)
    conditions: Conditions = field(default_factory=lambda: Conditions(frozenset(), frozenset()))
    has_window: bool = False
    has_set_operation: bool = False
    has_subquery_node: bool = False
    has_write: bool = False

    @classmethod
    def of(cls, root: exp.Expr) -> Census:
        """Walk ``root`` once; drop the parser's text positions on the way
        (:func:`stef.sql.dialects.drop_positions`: every later copy of a subtree, one per
        ``Expression.sql()``, would deep-copy them, and nothing reads them).

        Each queued node carries what its ancestors decide for it: its nearest SELECT, whether
        a window is above it, whether it sits inside a condition or under a clause (the rules
        of :func:`stef.sql.scope.conditions`).
        """
        out = cls()
        in_condition: set[int] = set()
        in_clause: set[int] = set()
        start_clause = root.find_ancestor(*PREDICATE_CLAUSES) is not None
        # (node, its SELECT, window above, inside a condition, under a clause)
        queue = deque(
            [
                (
                    root,
                    root.find_ancestor(exp.Select),
                    root.find_ancestor(exp.Window) is not None,
                    False,
                    start_clause,
                )
            ]
        )
        kinds = _KINDS
        while queue:
            node, select, windowed, cond, clause = queue.popleft()
            drop_positions(node)
            kind = kinds.get(type(node))
            if kind is None:
                kind = _kind_of(type(node))
            if kind:
                out._note(node, kind, select, windowed)
            if cond:
                in_condition.add(id(node))
            if clause:
                in_clause.add(id(node))
            child_select = cast(exp.Select, node) if kind & _SELECT else select
            child_windowed = windowed or bool(kind & _WINDOW)
            is_clause = bool(kind & _CLAUSE)
            child_clause = clause or is_clause
            # The root's own clauses do not count: they shape the result, not another query.
            inner = node is not root
            child_cond = inner and (cond or is_clause)
            on = node.args.get("on") if kind & _JOIN and inner else None
            for child in node.iter_expressions():
                queue.append(
                    (
                        child,
                        child_select,
                        child_windowed,
                        child_cond or child is on,
                        child_clause,
                    )
                )
        out.conditions = Conditions(frozenset(in_condition), frozenset(in_clause))
        return out

    def _note(self, node: exp.Expr, kind: int, select: exp.Select | None, windowed: bool) -> None:
        """File one node under every list and flag its kind names."""
        if kind & _SELECT:
            self.selects.append(node)  # type: ignore[arg-type]
        if kind & _TABLE:
            self.tables.append(node)  # type: ignore[arg-type]
        if kind & _CTE:
            self.ctes.append(node)  # type: ignore[arg-type]
        if kind & _FUNCTION:
            self.functions.append(node)  # type: ignore[arg-type]
        if kind & _AGGREGATE and not windowed and select is not None:
            self.aggregates.setdefault(id(select), []).append(node)  # type: ignore[arg-type]
        if kind & _WINDOW:
            self.has_window = True
        if kind & _SET_OPERATION:
            self.has_set_operation = True
        if kind & _SUBQUERY:
            self.has_subquery_node = True
        if kind & _WRITE:
            self.has_write = True


# What a node is to the census, one bit per question, decided once per node class: a dozen
# isinstance tests per node were most of the walk's cost.
_SELECT, _TABLE, _CTE, _FUNCTION, _AGGREGATE = 1, 2, 4, 8, 16
_WINDOW, _SET_OPERATION, _SUBQUERY, _WRITE, _CLAUSE, _JOIN = 32, 64, 128, 256, 512, 1024
_KINDS: dict[type, int] = {}


def _kind_of(cls: type) -> int:
    """The census bits of a node class (cached in ``_KINDS``; the GIL makes the write safe)."""
    kind = 0
    for bit, types in (
        (_SELECT, exp.Select),
        (_TABLE, exp.Table),
        (_CTE, exp.CTE),
        (_AGGREGATE, exp.AggFunc),
        (_WINDOW, exp.Window),
        (_SET_OPERATION, exp.SetOperation),
        (_SUBQUERY, exp.Subquery),
        (_WRITE, MUTATING),
        (_CLAUSE, PREDICATE_CLAUSES),
        (_JOIN, exp.Join),
    ):
        if issubclass(cls, types):
            kind |= bit
    if issubclass(cls, exp.Func) and not issubclass(cls, exp.Connector | exp.Binary):
        kind |= _FUNCTION
    _KINDS[cls] = kind
    return kind
