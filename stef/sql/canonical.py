"""Canonical forms of SQL fragments: folded values and identifiers, canonical expression text.

Two spellings of the same thing (``2023.0`` and ``2023``, ``"Region"`` and ``region``,
``t.col`` and ``col``) get one text, so the predicates, projections and groupings of
:mod:`stef.stages.sqlspec` compare by meaning, not by layout.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.sql.dialects import render

# The one pattern of a single-quoted SQL string literal ('' is an escaped quote); group 1 is the
# body, still escaped.
SQL_STRING = re.compile(r"'((?:[^']|'')*)'")

_NON_NUMBERS = ("nan", "inf", "-inf", "+inf", "infinity", "-infinity")
# sqlglot's date-literal constructors: DATE('2024-01-05') compares as the value '2024-01-05'.
_DATE_LITERALS = ("Date", "Timestamp", "TsOrDsToDate", "StrToDate", "DateStrToDate")


def norm_value(text: str) -> str:
    """Case- and whitespace-fold a value; canonical text for numbers (2023.0 -> 2023)."""
    v = " ".join(text.split()).casefold()
    try:
        f = float(v)
    except ValueError:
        return v
    if v in _NON_NUMBERS:
        return v
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return repr(f)


def norm_ident(name: str) -> str:
    """An identifier as compared: trimmed and case-folded."""
    return name.strip().casefold()


def _fold_outside_strings(text: str, *, fold_strings: bool) -> str:
    """Case-fold SQL text; string literals keep their case unless ``fold_strings``."""
    pieces: list[str] = []
    last = 0
    for m in SQL_STRING.finditer(text):
        pieces.append(text[last : m.start()].casefold())
        pieces.append(m.group(0).casefold() if fold_strings else m.group(0))
        last = m.end()
    pieces.append(text[last:].casefold())
    return "".join(pieces)


def _unqualified(node: exp.Expr) -> exp.Expr:
    """``node`` without table qualifiers and identifier quotes (a copy only when needed)."""
    needs_copy = any(c.args.get("table") is not None for c in node.find_all(exp.Column)) or any(
        i.args.get("quoted") for i in node.find_all(exp.Identifier)
    )
    if not needs_copy:
        return node
    copy = node.copy()
    for col in copy.find_all(exp.Column):
        col.set("table", None)
        col.set("db", None)
        col.set("catalog", None)
    for ident in copy.find_all(exp.Identifier):
        ident.set("quoted", False)
    return copy


def canon(node: exp.Expr, *, fold_strings: bool = False) -> str:
    """Canonical text of an expression: qualifiers and quotes dropped, identifiers and function
    names and keywords lower-case, generic dialect. String literals keep their case ('%Y' is not
    '%y') unless ``fold_strings`` (for compared values, which fold like every value)."""
    if type(node) is exp.Column and not node.args.get("join_mark"):
        ident = node.this
        # Most terms are a column: rendered once per short name (a long one each time, not kept).
        if type(ident) is exp.Identifier and len(ident.this) <= _CACHED_NAME_CHARS:
            return _column_text(ident.this, fold_strings)
    return _rendered(node, fold_strings)


def _rendered(node: exp.Expr, fold_strings: bool) -> str:
    bare = _unqualified(node)
    try:
        # A copy of our own already when qualifiers or quotes went: no second copy.
        text = render(bare, copy=bare is node)
    except SqlglotError:
        text = str(bare)
    return _fold_outside_strings(" ".join(text.split()), fold_strings=fold_strings)


_CACHED_NAME_CHARS = 128


@lru_cache(maxsize=4096)
def _column_text(name: str, fold_strings: bool) -> str:
    """:func:`canon` of a column named ``name``, whatever its qualifier and quotes."""
    return _rendered(exp.Column(this=exp.Identifier(this=name, quoted=False)), fold_strings)


def literal_value(node: exp.Expr) -> str | None:
    """The value of a literal-like node (string, number, boolean, date literal, negation)."""
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Literal):
        return norm_value(str(node.this))
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)
        return f"-{inner}" if inner is not None else None
    if isinstance(node, exp.Cast | exp.TryCast) and isinstance(node.this, exp.Literal):
        return norm_value(str(node.this.this))
    if type(node).__name__ in _DATE_LITERALS:
        args = [a for a in node.args.values() if isinstance(a, exp.Literal)]
        if len(args) >= 1 and args[0].is_string:
            return norm_value(str(args[0].this))
    return None


def is_literal(node: exp.Expr) -> bool:
    """Whether ``node`` is a constant: a literal-like value or NULL."""
    return literal_value(node) is not None or isinstance(node, exp.Null)


def values_in(node: exp.Expr) -> list[str]:
    """The folded values of every literal under ``node``, in tree order."""
    out: list[str] = []
    for lit in node.find_all(exp.Literal, exp.Boolean):
        value = literal_value(lit)
        if value is not None:
            out.append(value)
    return out
