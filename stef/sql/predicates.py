"""Predicates: one WHERE/HAVING/ON condition -> atomic (lhs, op, rhs) predicates, normalized.

AND-split with NOT pushed inward (De Morgan), OR groups kept whole, literal sides flipped to the
right, LIKE without wildcards read as ``=``, single-value IN as ``=``; values case- and
whitespace-folded, numbers canonical. Used by :mod:`stef.stages.sqlspec` and, for the benign
filters of the rules, by :mod:`stef.stages.align`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

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


# ----------------------------------------------------------------------------- normalization


def norm_value(text: str) -> str:
    """Case- and whitespace-fold a value; canonical text for numbers (2023.0 -> 2023)."""
    v = " ".join(text.split()).casefold()
    try:
        f = float(v)
    except ValueError:
        return v
    if v in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
        return v
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return repr(f)


def norm_ident(name: str) -> str:
    return name.strip().casefold()


_STRING_LITERAL = re.compile(r"('(?:[^']|'')*')")


def canon(node: exp.Expr, *, fold_strings: bool = False) -> str:
    """Canonical text of an expression: qualifiers and quotes dropped, identifiers and function
    names and keywords lower-case, generic dialect. String literals keep their case ('%Y' is not
    '%y') unless ``fold_strings`` (for compared values, which fold like every value)."""
    needs_copy = any(c.args.get("table") is not None for c in node.find_all(exp.Column)) or any(
        i.args.get("quoted") for i in node.find_all(exp.Identifier)
    )
    copy = node.copy() if needs_copy else node
    if needs_copy:
        for col in copy.find_all(exp.Column):
            col.set("table", None)
            col.set("db", None)
            col.set("catalog", None)
        for ident in copy.find_all(exp.Identifier):
            ident.set("quoted", False)
    try:
        text = copy.sql(comments=False)
    except SqlglotError:
        text = str(copy)
    parts = _STRING_LITERAL.split(" ".join(text.split()))
    return "".join(p if i % 2 and not fold_strings else p.casefold() for i, p in enumerate(parts))


def _literal_value(node: exp.Expr) -> str | None:
    """The value of a literal-like node (string, number, boolean, date literal, negation)."""
    if isinstance(node, exp.Paren):
        return _literal_value(node.this)
    if isinstance(node, exp.Literal):
        return norm_value(str(node.this))
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Neg):
        inner = _literal_value(node.this)
        return f"-{inner}" if inner is not None else None
    if isinstance(node, exp.Cast | exp.TryCast) and isinstance(node.this, exp.Literal):
        return norm_value(str(node.this.this))
    if type(node).__name__ in ("Date", "Timestamp", "TsOrDsToDate", "StrToDate", "DateStrToDate"):
        args = [a for a in node.args.values() if isinstance(a, exp.Literal)]
        if len(args) >= 1 and args[0].is_string:
            return norm_value(str(args[0].this))
    return None


def is_literal(node: exp.Expr) -> bool:
    return _literal_value(node) is not None or isinstance(node, exp.Null)


def _values_in(node: exp.Expr) -> list[str]:
    out: list[str] = []
    for lit in node.find_all(exp.Literal, exp.Boolean):
        value = _literal_value(lit)
        if value is not None:
            out.append(value)
    return out


def _strip_wildcards(pattern: str) -> str:
    return " ".join(pattern.replace("%", " ").split())


def _column_key(node: exp.Expr) -> str:
    if isinstance(node, exp.Column):
        return norm_ident(node.name)
    return canon(node)


# ---------------------------------------------------------------------------------- predicates


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


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    """AND-split a condition, pushing NOT inward (De Morgan) so every part is atomic or an OR."""
    node = _unparen(node)
    if isinstance(node, exp.Not):
        inner = _unparen(node.this)
        if isinstance(inner, exp.Not):
            yield from conjuncts(inner.this)
            return
        if isinstance(inner, exp.Or):
            for d in _disjuncts(inner):
                yield from conjuncts(exp.Not(this=d.copy()))
            return
        if isinstance(inner, exp.And):
            yield exp.or_(*(exp.Not(this=c.copy()) for c in conjuncts(inner)), copy=False)
            return
    if isinstance(node, exp.And):
        yield from conjuncts(node.left)
        yield from conjuncts(node.right)
    else:
        yield node


def _columns_of(node: exp.Expr) -> list[str]:
    return [norm_ident(c.name) for c in node.find_all(exp.Column)]


def _text(node: exp.Expr, dialect: str | None) -> str:
    try:
        return node.sql(dialect=dialect, comments=False)
    except SqlglotError:
        return str(node)


def predicate_of(node: exp.Expr, dialect: str | None = None) -> Pred | None:
    """One atomic predicate from a condition; None for a pure join condition (col = col)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if node.args.get("negate") and not isinstance(node, exp.Not):
        # sqlglot writes x NOT LIKE y as Like(negate=True): read it as NOT (x LIKE y).
        plain = node.copy()
        plain.set("negate", None)
        inner = predicate_of(plain, dialect)
        if inner is None:
            return None
        op = _NEGATE.get(inner.op, f"not {inner.op}")
        return Pred(
            inner.lhs,
            op,
            inner.rhs,
            _text(node, dialect),
            inner.columns,
            inner.values,
            inner.wildcard,
        )
    text = _text(node, dialect)
    columns = _columns_of(node)
    if isinstance(node, exp.Not):
        inner = predicate_of(node.this, dialect)
        if inner is None:
            return None
        if inner.op == "expr":  # WHERE NOT is_active: still one opaque boolean expression
            return Pred(canon(node), "expr", "", text, inner.columns, inner.values)
        op = _NEGATE.get(inner.op, f"not {inner.op}")
        return Pred(inner.lhs, op, inner.rhs, text, inner.columns, inner.values, inner.wildcard)
    for cls, op in _COMPARISONS.items():
        if type(node) is cls and isinstance(node, exp.Binary):
            left, right = node.left, node.right
            if is_literal(left) and not is_literal(right):
                left, right, op = right, left, _MIRROR[op]
            if isinstance(left, exp.Column) and isinstance(right, exp.Column) and op == "=":
                lt, rt = left.table, right.table
                if lt and rt and lt.casefold() != rt.casefold():
                    return None  # a join written in WHERE, not a filter
            rv = _literal_value(right)
            values = [rv] if rv is not None else _values_in(right)
            return Pred(
                _column_key(left),
                op,
                rv if rv is not None else canon(right, fold_strings=True),
                text,
                columns,
                values,
            )
    if isinstance(node, exp.Like | exp.ILike):
        pattern = _literal_value(node.expression)
        if pattern is None:
            return Pred(
                _column_key(node.this),
                "like",
                canon(node.expression),
                text,
                columns,
                _values_in(node.expression),
            )
        wildcard = "%" in pattern or "_" in pattern
        op = "like" if wildcard else "="
        return Pred(
            _column_key(node.this),
            op,
            pattern,
            text,
            columns,
            [_strip_wildcards(pattern)],
            wildcard,
        )
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            sub = node.args.get("query") or node.args["unnest"]
            return Pred(_column_key(node.this), "in", "(subquery)", text, columns, _values_in(sub))
        items = node.expressions
        vals = [_literal_value(i) for i in items]
        if len(items) == 1:
            v = vals[0]
            return Pred(
                _column_key(node.this),
                "=",
                v if v is not None else canon(items[0]),
                text,
                columns,
                [v] if v is not None else _values_in(items[0]),
            )
        rhs_vals = [v if v is not None else canon(i) for v, i in zip(vals, items, strict=True)]
        return Pred(
            _column_key(node.this),
            "in",
            ", ".join(sorted(rhs_vals)),
            text,
            columns,
            [v for v in vals if v is not None],
        )
    if isinstance(node, exp.Between):
        low, high = node.args.get("low"), node.args.get("high")
        parts = [_literal_value(x) if x is not None else None for x in (low, high)]
        rhs = " and ".join(
            p if p is not None else canon(x) for p, x in zip(parts, (low, high), strict=True) if x
        )
        return Pred(
            _column_key(node.this),
            "between",
            rhs,
            text,
            columns,
            [p for p in parts if p is not None],
        )
    if isinstance(node, exp.Is):
        target = node.expression
        if isinstance(target, exp.Null):
            return Pred(_column_key(node.this), "is null", "", text, columns, [])
        v = _literal_value(target)
        return Pred(
            _column_key(node.this), "=", v or canon(target), text, columns, [v] if v else []
        )
    if isinstance(node, exp.Or):
        subs = [predicate_of(d, dialect) for d in _disjuncts(node)]
        lhss = {p.lhs for p in subs if p is not None}
        lhs = lhss.pop() if len(lhss) == 1 and all(subs) else "expr"
        values = [v for p in subs if p is not None for v in p.values]
        return Pred(
            lhs,
            "or",
            canon(node, fold_strings=True),
            text,
            columns,
            values,
            any(p.wildcard for p in subs if p is not None),
        )
    if isinstance(node, exp.And):
        subs = [predicate_of(c, dialect) for c in conjuncts(node)]
        values = [v for p in subs if p is not None for v in p.values]
        return Pred("expr", "and", canon(node, fold_strings=True), text, columns, values)
    if isinstance(node, exp.Exists):
        return Pred("expr", "exists", canon(node), text, columns, _values_in(node))
    return Pred(canon(node), "expr", "", text, columns, _values_in(node))


def _disjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        yield from _disjuncts(node.left)
        yield from _disjuncts(node.right)
    else:
        yield node


def parse_condition(text: str, dialect: str | None = None) -> exp.Expr | None:
    """Parse a bare SQL predicate (a benign filter from the rules); None if it is not one."""
    try:
        tree = sqlglot.parse_one(f"SELECT 1 WHERE {text}", read=dialect)
    except (SqlglotError, ValueError, RecursionError):
        return None
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None or tree.args.get("from_") is not None or tree.args.get("limit") is not None:
        return None
    if tree.args.get("group") or tree.args.get("order") or tree.args.get("having"):
        return None
    return where.this  # type: ignore[no-any-return]


def condition_keys(text: str, dialect: str | None = None) -> list[tuple[str, str, str]]:
    """The (lhs, op, rhs) keys of every atomic predicate in a rules predicate text."""
    node = parse_condition(text, dialect)
    if node is None:
        return []
    out = []
    for c in conjuncts(node):
        p = predicate_of(c, dialect)
        if p is not None:
            out.append(p.key)
    return out
