"""SQL for people: formatted by sqlglot and split into highlight spans.

The spans are data (``[kind, text]`` pairs) that the page turns into text nodes; no markup is
ever built from the SQL, so nothing in a record can become HTML.
"""

from __future__ import annotations

from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType
from sqlglot.tokens import Tokenizer

from stef.sql.dialects import dialect_of, parse_sql

_STRINGS = {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING}
_NUMBERS = {TokenType.NUMBER}


def formatted(sql: str, dialect: str | None = None) -> str:
    """``sql`` pretty-printed by sqlglot; as given when sqlglot cannot parse it."""
    try:  # through parse_sql: SQL nesting calls past what a parse survives is shown as given
        trees = parse_sql(sql, dialect)
        statements = [dialect_of(dialect).generate(tree, pretty=True) for tree in trees]
    except (SqlglotError, RecursionError, ValueError):
        return sql
    text = ";\n\n".join(s for s in statements if s.strip())
    return text or sql


def spans(sql: str) -> list[list[str]]:
    """``[kind, text]`` covering ``sql`` exactly: kind ``kw`` (keyword), ``str``, ``num`` or
    ``""`` (everything else, comments and whitespace included)."""
    try:
        tokens = Tokenizer().tokenize(sql)
    except (SqlglotError, RecursionError, ValueError):
        return [["", sql]]
    out: list[list[str]] = []
    pos = 0
    for tok in tokens:
        start, end = tok.start, tok.end + 1
        if start < pos or end > len(sql):
            continue  # a token whose offsets do not fit (never expected): shown as plain text
        if start > pos:
            out.append(["", sql[pos:start]])
        out.append([_kind(tok.token_type, sql[start:end]), sql[start:end]])
        pos = end
    if pos < len(sql):
        out.append(["", sql[pos:]])
    merged: list[list[str]] = []
    for kind, text in out:  # fewer nodes: neighbouring plain runs joined
        if merged and merged[-1][0] == kind == "":
            merged[-1][1] += text
        else:
            merged.append([kind, text])
    return merged


def _kind(kind: TokenType, text: str) -> str:
    if kind in _STRINGS:
        return "str"
    if kind in _NUMBERS:
        return "num"
    # Multi-word keywords (GROUP BY, ORDER BY) are one token with their inner whitespace.
    if text.replace(" ", "").isalpha() and " ".join(text.upper().split()) in Tokenizer.KEYWORDS:
        return "kw"
    return ""
