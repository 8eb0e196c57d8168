"""What a right transform returns, and the re-formatting one: the same tree printed another way."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.sqlite import SQLite
from sqlglot.tokenizer_core import TokenType

from bench.mutations.golds import DIALECT

_WORDS = re.compile(r"^[A-Za-z_][A-Za-z_ ]*$")
_NOT_KEYWORDS = {TokenType.VAR, TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER}


@dataclass(frozen=True)
class Rewrite:
    """What a transform did; ``sql`` when it gives its own text (else the tree is rendered)."""

    detail: str
    sql: str | None = None


def recased(tree: exp.Expr) -> str:
    """The tree pretty-printed on several lines, its unquoted identifiers' case inverted
    (upper-case, or lower-case when already upper) and its keywords and functions lower-cased.
    SQLite's identifiers and keywords are case-insensitive; string literals are left as they are.
    """
    tree = tree.copy()
    for ident in tree.find_all(exp.Identifier):
        if not ident.quoted:
            name = ident.this
            ident.set("this", name.lower() if name.isupper() else name.upper())
    text = tree.sql(dialect=DIALECT, pretty=True, normalize_functions="lower")
    out = list(text)
    for token in SQLite().tokenize(text):
        if token.token_type not in _NOT_KEYWORDS and _WORDS.match(token.text):
            out[token.start : token.end + 1] = list(text[token.start : token.end + 1].lower())
    return "".join(out)


def case_folded(tree: exp.Expr) -> str:
    """The tree's one-line rendering with unquoted identifiers lower-cased: equal for two trees
    that differ only in formatting and identifier case."""
    tree = tree.copy()
    for ident in tree.find_all(exp.Identifier):
        if not ident.quoted:
            ident.set("this", ident.this.lower())
    return tree.sql(dialect=DIALECT)
