"""How deep SQL nests function calls, and what that costs the parser, known before it parses.

sqlglot's parser backtracks on calls whose name is also a type (``DATE(``, ``TIMESTAMP(``,
``CHAR(``, ``DECIMAL(``), and some dialects expand a call into a tree that holds its argument
twice (Snowflake's ``DIV0``, MySQL's ``BINARY``): the parse of ``DATE(DATE(...1...))`` doubles
with each level, ``DIV0`` and ``BINARY`` grow by two to three times a level (measured on
2026-12-01); 20 levels of ``DATE`` took 4 s, 17 of ``DIV0`` 46 s and 891 MB, 18 92 s and
1.7 GB, and no budget can stop a parse once it has started. The parenthesis depth bound (64)
allows far more. Real queries nest calls a few levels deep: at most 5 in the 2,002 labelled
records and the samples; 10 levels of the costliest call measured cost 0.15 s.

Two guards. :func:`call_nesting` reads the text (a record's limit, ``sql_call_nesting``, said
as a dead letter); a comment or a string can hide a parenthesis from it. :func:`check_calls`
reads the tokens the parser is about to read, so nothing hides from it, and bounds the whole
statement's cost (many sibling chains of 10 levels add up), not only its depth: every parse
of STEF goes through it (:func:`stef.sql.dialects.parse_sql`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

# The depth a record's SQL, a reference and a rules filter may nest calls to
# (``limits.max_sql_call_nesting`` for records).
MAX_CALL_NESTING = 10

# A word and the opening parenthesis after it, any other opening parenthesis, a closing one.
# String literals are not skipped: a parenthesis in one counts, as for the parenthesis bound (a
# text within the bound is within it either way).
_PARENS = re.compile(r"(\w+)\s*\(|\(|\)")
# Words before a parenthesis that open no call: subqueries, lists, groups.
_NOT_CALLS = frozenset({
    "in", "as", "exists", "over", "values", "on", "and", "or", "not", "from", "join", "where",
    "select", "then", "else", "when", "all", "any", "some", "using", "with", "union",
    "intersect", "except", "case", "is", "between", "like", "ilike", "by", "filter", "within",
    "having", "lateral", "table", "into", "set", "return", "returns", "recursive",
})  # fmt: skip


def call_nesting(sql: str) -> int:
    """The deepest nesting of function calls in ``sql`` (``f(g(x))`` is 2; a subquery, a
    list or a group adds no level). Stray closing parentheses count as nothing."""
    if "(" not in sql:
        return 0
    return max(_call_depths(_text_words(sql)), default=0)


def _text_words(sql: str) -> Iterator[str | None]:
    """What :func:`_call_depths` reads of a text: the word before each opening parenthesis
    (None when there is none) and the parentheses."""
    for m in _PARENS.finditer(sql):
        if m.group(0) == ")":
            yield ")"
        else:
            yield m.group(1)  # None: a parenthesis after no word
            yield "("


def _call_depths(words: Iterable[str | None]) -> Iterator[int]:
    """The depth of each call opened in ``words`` (a word, or None for anything that is not
    one, and the parentheses): an opening parenthesis after a word that is not a keyword of
    :data:`_NOT_CALLS` opens a call; a closing one closes what its opening one opened."""
    stack: list[bool] = []
    depth = 0
    before: str | None = None
    for word in words:
        if word == "(":
            call = before is not None and before not in "()" and before.casefold() not in _NOT_CALLS
            stack.append(call)
            if call:
                depth += 1
                yield depth
        elif word == ")" and stack and stack.pop():
            depth -= 1
        before = word


# What a parse may spend on nested calls: a call at depth d weighs 3**d (the costliest call
# nearly triples the parse a level). One chain of MAX_CALL_NESTING levels weighs about half of
# it, so two such chains parse and a third, or a chain one level deeper, does not.
CALL_BUDGET = 3 ** (MAX_CALL_NESTING + 1)


class CallsTooDeep(ValueError):
    """Calls nested past what a parse survives (:func:`check_calls`)."""


def check_calls(words: Sequence[str | None]) -> None:
    """Refuse a statement whose nested calls would cost the parser more than
    :data:`CALL_BUDGET`, read from its tokens: for each token, its text when it is an opening
    or closing parenthesis or a word, else None.

    Raises:
        CallsTooDeep: with the deepest nesting seen.
    """
    cost = deepest = 0
    for depth in _call_depths(words):
        deepest = max(deepest, depth)
        cost += 3**depth
        if cost > CALL_BUDGET:
            raise CallsTooDeep(
                f"function calls nested {deepest} deep, more than a parse can afford "
                f"(at most {MAX_CALL_NESTING} levels, and few chains that deep)"
            )
