"""Predicates: one WHERE/HAVING/ON condition -> atomic (lhs, op, rhs) predicates, normalized.

AND-split with NOT pushed inward (De Morgan), OR groups kept whole, literal sides flipped to the
right, LIKE without wildcards read as ``=``, single-value IN as ``=``; values case- and
whitespace-folded, numbers canonical (:mod:`stef.sql.canonical`). Used by
:mod:`stef.stages.sqlspec` and, for the benign filters of the rules, by :mod:`stef.stages.align`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Literal, cast

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.sql.canonical import canon, is_literal, literal_value, values_in

# Re-exported: stef.stages.align still imports it from here.
from stef.sql.canonical import norm_ident as norm_ident
from stef.sql.dialects import parse_sql, render
from stef.sql.nesting import MAX_CALL_NESTING, call_nesting

Clause = Literal["where", "having", "qualify", "join"]
_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "=",
}
_MIRROR = {"=": "=", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}
_NEGATE = {
    "=": "!=",
    "!=": "=",
    "like": "not like",
    "not like": "like",
    "in": "not in",
    "not in": "in",
    "is null": "is not null",
    "is not null": "is null",
    "between": "not between",
    "not between": "between",
    "exists": "not exists",
    "not exists": "exists",
    # NOT (a > 5) is a <= 5 under SQL's three-valued logic: both reject NULL.
    ">": "<=",
    ">=": "<",
    "<": ">=",
    "<=": ">",
}


class Pred:
    """A predicate before numbering."""

    __slots__ = ("clause", "columns", "lhs", "op", "rhs", "text", "values", "wildcard")

    def __init__(
        self,
        lhs: str,
        op: str,
        rhs: str,
        text: str,
        columns: Iterable[str],
        values: Iterable[str],
        wildcard: bool = False,
        clause: Clause = "where",
    ) -> None:
        self.lhs, self.op, self.rhs, self.text = lhs, op, rhs, text
        self.columns = tuple(dict.fromkeys(columns))
        self.values = tuple(dict.fromkeys(values))
        self.wildcard = wildcard
        self.clause = clause

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.lhs, self.op, self.rhs)


# ------------------------------------------------------------------------------ AND / OR split


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    """AND-split a condition, pushing NOT inward (De Morgan) so every part is atomic or an OR.

    Left to right, with an explicit stack: an AND chain of a thousand terms is a tree a thousand
    levels deep, past Python's recursion limit.
    """
    stack = [node]
    while stack:
        node = _unparen(stack.pop())
        if isinstance(node, exp.Not):
            inner = _unparen(node.this)
            if isinstance(inner, exp.Not):
                stack.append(inner.this)
                continue
            if isinstance(inner, exp.Or):
                negated = [exp.Not(this=d.copy()) for d in _disjuncts(inner)]
                stack.extend(reversed(negated))
                continue
            if isinstance(inner, exp.And):
                # One level deeper per NOT (... AND ...) written in parentheses: bounded by the
                # nesting that validate allows, not by the length of a chain.
                yield exp.or_(*(exp.Not(this=c.copy()) for c in conjuncts(inner)), copy=False)
                continue
        if isinstance(node, exp.And):
            stack.append(node.right)
            stack.append(node.left)
        else:
            yield node


def _disjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    """OR-split a condition, left to right (an explicit stack, as in :func:`conjuncts`)."""
    stack = [node]
    while stack:
        node = _unparen(stack.pop())
        if isinstance(node, exp.Or):
            stack.append(node.right)
            stack.append(node.left)
        else:
            yield node


# ------------------------------------------------------------------------- one predicate kind


def _strip_wildcards(pattern: str) -> str:
    return " ".join(pattern.replace("%", " ").split())


def _column_key(node: exp.Expr) -> str:
    if isinstance(node, exp.Column):
        return norm_ident(node.name)
    return canon(node)


def _columns_of(node: exp.Expr) -> list[str]:
    return [norm_ident(c.name) for c in node.find_all(exp.Column)]


def _text(node: exp.Expr, dialect: str | None) -> str:
    try:
        return render(node, dialect)
    except SqlglotError:
        return str(node)


def _negation_of(inner: Pred, text: str) -> Pred:
    """NOT ``inner``: the operator negated, everything else kept."""
    op = _NEGATE.get(inner.op, f"not {inner.op}")
    return Pred(inner.lhs, op, inner.rhs, text, inner.columns, inner.values, inner.wildcard)


# A reader turns one condition of its kind into a predicate: (node, its text in the dialect, the
# columns it names, the dialect) -> Pred, or None for a join condition.
_Reader = Callable[[exp.Expr, str, list[str], str | None], Pred | None]


def _read_not(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred | None:
    inner = predicate_of(node.this, dialect)
    if inner is None:
        return None
    if inner.op == "expr":  # WHERE NOT is_active: still one opaque boolean expression
        return Pred(canon(node), "expr", "", text, inner.columns, inner.values)
    return _negation_of(inner, text)


def _read_comparison(
    node: exp.Expr, text: str, columns: list[str], dialect: str | None
) -> Pred | None:
    """``a = 1``, ``1 < a`` (mirrored to ``a > 1``); None for ``t.a = u.b`` (a join)."""
    op = _COMPARISONS[type(node)]
    left, right = cast(exp.Binary, node).left, cast(exp.Binary, node).right
    if is_literal(left) and not is_literal(right):
        left, right, op = right, left, _MIRROR[op]
    if isinstance(left, exp.Column) and isinstance(right, exp.Column) and op == "=":
        lt, rt = left.table, right.table
        if lt and rt and lt.casefold() != rt.casefold():
            return None  # a join written in WHERE, not a filter
    rv = literal_value(right)
    values = [rv] if rv is not None else values_in(right)
    rhs = rv if rv is not None else canon(right, fold_strings=True)
    return Pred(_column_key(left), op, rhs, text, columns, values)


def _read_like(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    """LIKE / ILIKE: ``=`` without wildcards; the values are the pattern's words."""
    lhs = _column_key(node.this)
    pattern = literal_value(node.expression)
    if pattern is None:
        return Pred(lhs, "like", canon(node.expression), text, columns, values_in(node.expression))
    wildcard = "%" in pattern or "_" in pattern
    op = "like" if wildcard else "="
    return Pred(lhs, op, pattern, text, columns, [_strip_wildcards(pattern)], wildcard)


def _read_in(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    """IN (subquery), IN (one value) as ``=``, IN (list) with the values sorted."""
    lhs = _column_key(node.this)
    sub = node.args.get("query") or node.args.get("unnest")
    if sub is not None:
        return Pred(lhs, "in", "(subquery)", text, columns, values_in(sub))
    items = node.expressions
    vals = [literal_value(i) for i in items]
    if len(items) == 1:
        v = vals[0]
        rhs = v if v is not None else canon(items[0])
        return Pred(lhs, "=", rhs, text, columns, [v] if v is not None else values_in(items[0]))
    rhs_vals = [v if v is not None else canon(i) for v, i in zip(vals, items, strict=True)]
    values = [v for v in vals if v is not None]
    return Pred(lhs, "in", ", ".join(sorted(rhs_vals)), text, columns, values)


def _read_between(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    low, high = node.args.get("low"), node.args.get("high")
    parts = [literal_value(x) if x is not None else None for x in (low, high)]
    rhs = " and ".join(
        p if p is not None else canon(x) for p, x in zip(parts, (low, high), strict=True) if x
    )
    values = [p for p in parts if p is not None]
    return Pred(_column_key(node.this), "between", rhs, text, columns, values)


def _read_is(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    """IS NULL, or IS TRUE / IS FALSE read as ``=``."""
    target = node.expression
    if isinstance(target, exp.Null):
        return Pred(_column_key(node.this), "is null", "", text, columns, [])
    v = literal_value(target)
    return Pred(_column_key(node.this), "=", v or canon(target), text, columns, [v] if v else [])


def _read_or(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    """An OR group, kept whole; its lhs is the one column every branch constrains, if any."""
    subs = [predicate_of(d, dialect) for d in _disjuncts(node)]
    lhss = {p.lhs for p in subs if p is not None}
    lhs = lhss.pop() if len(lhss) == 1 and all(subs) else "expr"
    values = [v for p in subs if p is not None for v in p.values]
    wildcard = any(p.wildcard for p in subs if p is not None)
    return Pred(lhs, "or", canon(node, fold_strings=True), text, columns, values, wildcard)


def _read_and(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    """An AND that De Morgan left inside an OR branch: one opaque predicate."""
    subs = [predicate_of(c, dialect) for c in conjuncts(node)]
    values = [v for p in subs if p is not None for v in p.values]
    return Pred("expr", "and", canon(node, fold_strings=True), text, columns, values)


def _read_exists(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    return Pred("expr", "exists", canon(node), text, columns, values_in(node))


def _read_expression(node: exp.Expr, text: str, columns: list[str], dialect: str | None) -> Pred:
    """Any other condition (a boolean column, a function call): one opaque expression."""
    return Pred(canon(node), "expr", "", text, columns, values_in(node))


# Keyed by exact type: sqlglot defines no subclasses of these condition classes.
_READERS: dict[type[exp.Expr], _Reader] = {
    exp.Not: _read_not,
    **dict.fromkeys(_COMPARISONS, _read_comparison),
    exp.Like: _read_like,
    exp.ILike: _read_like,
    exp.In: _read_in,
    exp.Between: _read_between,
    exp.Is: _read_is,
    exp.Or: _read_or,
    exp.And: _read_and,
    exp.Exists: _read_exists,
}


def _read_negate_flag(node: exp.Expr, dialect: str | None) -> Pred | None:
    """sqlglot writes x NOT LIKE y as Like(negate=True): read it as NOT (x LIKE y)."""
    plain = node.copy()
    plain.set("negate", None)
    inner = predicate_of(plain, dialect)
    if inner is None:
        return None
    return _negation_of(inner, _text(node, dialect))


def predicate_of(node: exp.Expr, dialect: str | None = None) -> Pred | None:
    """One atomic predicate from a condition; None for a pure join condition (col = col)."""
    node = _unparen(node)
    if node.args.get("negate") and not isinstance(node, exp.Not):
        return _read_negate_flag(node, dialect)
    reader = _READERS.get(type(node), _read_expression)
    return reader(node, _text(node, dialect), _columns_of(node), dialect)


# ----------------------------------------------------------------------------- rules' filters


def parse_condition(text: str, dialect: str | None = None) -> exp.Expr | None:
    """Parse a bare SQL predicate (a benign filter from the rules); None if it is not one, or
    nests calls deeper than a record's SQL may (:mod:`stef.sql.nesting`: never parsed)."""
    if call_nesting(text) > MAX_CALL_NESTING:
        return None
    try:
        trees = parse_sql(f"SELECT 1 WHERE {text}", dialect)
    except (SqlglotError, ValueError, RecursionError):
        return None
    tree = trees[0] if len(trees) == 1 else None
    if not isinstance(tree, exp.Select):
        return None
    where = tree.args.get("where")
    if where is None or tree.args.get("from_") is not None or tree.args.get("limit") is not None:
        return None
    if tree.args.get("group") or tree.args.get("order") or tree.args.get("having"):
        return None
    return where.this  # type: ignore[no-any-return]


def condition_keys(text: str, dialect: str | None = None) -> list[tuple[str, str, str]]:
    """The (lhs, op, rhs) keys of every atomic predicate in a rules predicate text."""
    node = parse_condition(text, dialect)
    return [] if node is None else parsed_condition_keys(node, dialect)


def parsed_condition_keys(node: exp.Expr, dialect: str | None = None) -> list[tuple[str, str, str]]:
    """:func:`condition_keys` of a condition :func:`parse_condition` has parsed."""
    out = []
    for c in conjuncts(node):
        p = predicate_of(c, dialect)
        if p is not None:
            out.append(p.key)
    return out
