"""One written form for expressions that mean the same, anywhere in a query (reference mode).

:func:`canonical_forms` rewrites a tree in place before it is compared (:mod:`stef.sql.compare`):

- parentheses that change nothing go: ``(a + b)`` as a projection, ``(a * 1.0 / b)`` in ORDER BY,
  ``(x / y) * 100``; those that group against precedence stay (``a * (b + c)``);
- a comparison reads with its literal on the right (``'+' = label`` reads ``label = '+'``) and
  a comparison of two columns in one order, inside CASE, OR and HAVING alike;
- a product or sum with a literal reads with the literal on the right (``100 * x``: ``x * 100``);
- the year of a date reads ``YEAR(d)`` whatever extracts it (``STRFTIME('%Y', d)``,
  ``EXTRACT(YEAR FROM d)``, ``SUBSTR(d, 1, 4)``, ``YEAR(d)``), and ``d LIKE '1995%'`` reads
  ``YEAR(d) = 1995``;
- a division reads ``FDIV(a, b)`` when it divides as floats (an operand cast to a float type,
  multiplied by ``1.0``, or a dialect whose ``/`` always does) and stays a division otherwise:
  over integers SQLite's ``x / y`` truncates, so it is not ``CAST(x AS REAL) / y``.
"""

from __future__ import annotations

import re

from sqlglot import exp

# Dialects whose ``/`` divides integers as floats.
FLOAT_DIVISION_DIALECTS = frozenset(
    ("mysql", "bigquery", "duckdb", "snowflake", "spark", "databricks", "hive", "oracle")
)
_FLOAT_TYPES = frozenset(("float", "double", "real", "decimal", "numeric", "double precision"))
_MIRROR: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
}
_SYMMETRIC = (exp.EQ, exp.NEQ)
# Binding strength of the operators a parenthesis may group against.
_PRECEDENCE: dict[type[exp.Expr], int] = {
    exp.Or: 1,
    exp.And: 2,
    exp.EQ: 4,
    exp.NEQ: 4,
    exp.GT: 4,
    exp.GTE: 4,
    exp.LT: 4,
    exp.LTE: 4,
    exp.Like: 4,
    exp.ILike: 4,
    exp.Is: 4,
    exp.DPipe: 5,
    exp.Add: 6,
    exp.Sub: 6,
    exp.Mul: 7,
    exp.Div: 7,
    exp.Mod: 7,
}
_ATOMS = (exp.Column, exp.Literal, exp.Func, exp.Paren, exp.Null, exp.Boolean, exp.Star)
# What a date function wraps its argument in (a cast to a date or timestamp).
_WRAPPERS = (exp.Cast, exp.TsOrDsToDate, exp.TsOrDsToTimestamp, exp.Paren)
_YEAR_PATTERN = re.compile(r"^(\d{4})%$")


def canonical_forms(root: exp.Expr, dialect: str | None) -> None:
    """Rewrite ``root`` in place into the forms above (deepest nodes first)."""
    _drop_parens(root)
    _years(root)
    _divisions(root, float_division=(dialect or "").casefold() in FLOAT_DIVISION_DIALECTS)
    for node in reversed(list(root.find_all(*_MIRROR, exp.Mul, exp.Add))):
        _commute(node)


def _drop_parens(root: exp.Expr) -> None:
    for paren in reversed(list(root.find_all(exp.Paren))):
        parent, inner = paren.parent, paren.this
        if parent is None or not isinstance(inner, exp.Expr):
            continue
        if _redundant(paren, inner, parent):
            paren.replace(inner)


def _redundant(paren: exp.Paren, inner: exp.Expr, parent: exp.Expr) -> bool:
    if isinstance(inner, exp.Query):
        return False
    if isinstance(inner, _ATOMS):
        return True
    if not isinstance(parent, exp.Binary | exp.Unary):
        return True
    if isinstance(parent, exp.Unary):
        return False
    outer_rank, inner_rank = _PRECEDENCE.get(type(parent)), _PRECEDENCE.get(type(inner))
    if outer_rank is None or inner_rank is None:
        return False
    if inner_rank > outer_rank:
        return True
    associative = type(inner) is type(parent) and isinstance(inner, exp.And | exp.Or)
    return inner_rank == outer_rank and (associative or parent.this is paren)


def _years(root: exp.Expr) -> None:
    for node in reversed(list(root.find_all(exp.Func, exp.Like))):
        if node.parent is None and node is not root:
            continue
        if isinstance(node, exp.Like):
            pattern = node.expression
            match = (
                _YEAR_PATTERN.match(str(pattern.this))
                if isinstance(pattern, exp.Literal) and pattern.is_string
                else None
            )
            if match is not None:
                node.replace(exp.EQ(this=_year(node.this), expression=exp.Literal.number(match[1])))
            continue
        column = _year_of(node)
        if column is not None:
            node.replace(_year(column))


def _year(node: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this="YEAR", expressions=[node.copy()])


def _year_of(node: exp.Expr) -> exp.Expr | None:
    """What ``node`` takes the year of; None when it is not a year extraction."""
    if isinstance(node, exp.TimeToStr):
        fmt = node.args.get("format")
        if isinstance(fmt, exp.Literal) and str(fmt.this) == "%Y":
            return _bare(node.this)
    if isinstance(node, exp.Year):
        return _bare(node.this)
    if isinstance(node, exp.Extract) and node.this.name.casefold() == "year":
        return _bare(node.expression)
    if isinstance(node, exp.Substring):
        start, length = node.args.get("start"), node.args.get("length")
        if _int(start) == 1 and _int(length) == 4:
            return _bare(node.this)
    inner = node.this if isinstance(node, exp.Cast) else None
    if isinstance(inner, exp.Anonymous) and inner.name.upper() == "YEAR":
        return _bare(inner.expressions[0])
    return None


def _bare(node: exp.Expr) -> exp.Expr:
    while isinstance(node, _WRAPPERS) and isinstance(node.this, exp.Expr):
        node = node.this
    return node


def _int(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.this)
    return None


def _divisions(root: exp.Expr, *, float_division: bool) -> None:
    for div in reversed(list(root.find_all(exp.Div))):
        if div.parent is None and div is not root:
            continue
        if float_division or _is_float(div.this) or _is_float(div.expression):
            div.replace(exp.Anonymous(this="FDIV", expressions=[div.this, div.expression]))


def _is_float(node: exp.Expr | None) -> bool:
    """Whether ``node`` is a float by how it is written (a cast, a float literal, AVG)."""
    if isinstance(node, exp.Paren):
        return _is_float(node.this)
    if isinstance(node, exp.Cast):
        return node.to.this.value.lower() in _FLOAT_TYPES
    if isinstance(node, exp.Literal) and not node.is_string:
        return any(ch in str(node.this) for ch in ".eE")
    if isinstance(node, exp.Avg):
        return True
    if isinstance(node, exp.Anonymous) and node.name.upper() == "FDIV":
        return True
    if isinstance(node, exp.Mul | exp.Add | exp.Sub):
        return _is_float(node.this) or _is_float(node.expression)
    if isinstance(node, exp.Sum | exp.Max | exp.Min | exp.Round | exp.Abs):
        return _is_float(node.this)
    return False


def _is_literal(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal | exp.Null | exp.Boolean) or (
        isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)
    )


def _commute(node: exp.Expr) -> None:
    if not isinstance(node, exp.Binary):
        return
    left, right = node.this, node.expression
    if isinstance(node, exp.Mul | exp.Add):
        if _is_literal(left) and not _is_literal(right):
            node.set("this", right)
            node.set("expression", left)
        return
    mirrored = _MIRROR.get(type(node))
    if mirrored is None:
        return
    swap = _is_literal(left) and not _is_literal(right)
    if not swap and isinstance(node, _SYMMETRIC) and not _is_literal(right):
        swap = left.sql() > right.sql()
    if not swap:
        return
    if mirrored is type(node):
        node.set("this", right)
        node.set("expression", left)
    else:
        node.replace(mirrored(this=right, expression=left))
