"""Statement kinds and safety: which statement, whether it writes, whether there are several.

The SQL spec stage reads these off the parsed statements; for text sqlglot cannot parse,
:func:`scan_unparsed` reads them off the bare text with comments and string literals blanked.
"""

from __future__ import annotations

import re

from sqlglot import exp

from stef.sql.canonical import SQL_STRING

MUTATING = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Grant,
    *(getattr(exp, name) for name in ("Revoke", "Execute", "Copy") if hasattr(exp, name)),
)
_REVOKE = getattr(exp, "Revoke", None)
MUTATING_KEYWORDS = (
    "insert",
    "update",
    "delete",
    "merge",
    "create",
    "drop",
    "alter",
    "truncate",
    "grant",
    "revoke",
    "replace",
    "upsert",
    "copy",
    "call",
    "exec",
    "execute",
)
QUERY = (exp.Select, exp.SetOperation, exp.Subquery)
# Statements sqlglot parses to their own node that neither read nor write data.
_OTHER_STATEMENTS = {
    "use",
    "set",
    "describe",
    "show",
    "pragma",
    "transaction",
    "commit",
    "rollback",
    "copy",
    "analyze",
    "cache",
    "uncache",
    "refresh",
    "kill",
    "comment",
    "loaddata",
    "export",
    "declare",
}


def statement_type(stmt: exp.Expr) -> str:
    """``select`` for a query, else the statement's keyword (``insert``, ``truncate``, ...)."""
    if isinstance(stmt, QUERY):
        return "select"
    if isinstance(stmt, exp.TruncateTable):
        return "truncate"
    if isinstance(stmt, exp.Command):
        return str(stmt.this).split()[0].casefold() if stmt.this else "command"
    return str(stmt.key)


def is_mutating(stmt: exp.Expr, *, nested_write: bool | None = None) -> bool:
    """Whether the statement writes data or schema, also through a nested write.

    Args:
        stmt: the statement.
        nested_write: whether a node of ``stmt`` (itself included) is a write, when a walk of
            the tree already told (:class:`stef.sql.census.Census`); None walks it here.
    """
    if isinstance(stmt, MUTATING) or (_REVOKE is not None and isinstance(stmt, _REVOKE)):
        return True
    if isinstance(stmt, exp.Command):
        return statement_type(stmt) in MUTATING_KEYWORDS
    # A query can hide a write (Postgres data-modifying CTEs, SELECT ... INTO).
    if nested_write is None:
        nested_write = any(isinstance(n, MUTATING) for n in stmt.walk())
    return nested_write or stmt.args.get("into") is not None


def is_statement(stmt: exp.Expr) -> bool:
    """Whether sqlglot read a whole statement, not a bare expression (``1 + 1``, ``foo``)."""
    if isinstance(stmt, (*QUERY, *MUTATING, exp.Command)):
        return True
    if _REVOKE is not None and isinstance(stmt, _REVOKE):
        return True
    return stmt.key in _OTHER_STATEMENTS


# ------------------------------------------------------------------------------ unparsed text

# What scan_unparsed blanks: line comments, string literals, quoted identifiers, and the opener of
# a block comment (its end is found by _blank, not by a lazy ``/\*.*?\*/``). No two of them
# start with the same character, so the order of the alternatives does not matter.
_BLANKED = re.compile(
    r"--[^\n]*|(?P<opener>/\*)|" + SQL_STRING.pattern + r"|\"(?:[^\"]|\"\")*\"|`[^`]*`"
)
_MUTATING_RE = re.compile(
    r"\b(insert\s+into|update\s+\S+\s+set|delete\s+from|merge\s+into|create\s|drop\s|alter\s|"
    r"truncate\s|grant\s|revoke\s)",
    re.I,
)


def _blank(sql: str) -> str:
    """``sql`` with every comment, string literal and quoted identifier replaced by a space.

    A ``/*`` that no ``*/`` closes stays text, and the scan goes on after it. The regex this
    replaces (a lazy ``/*.*?*/`` among its alternatives) rescanned the rest of the text for each
    such opener, quadratic on a record of unclosed openers; the position of the last ``*/``
    tells at once whether an opener can close.
    """
    last_closer = sql.rfind("*/")
    pieces: list[str] = []
    copied = 0  # sql[:copied] is in pieces
    at = 0  # where the next search starts
    while (m := _BLANKED.search(sql, at)) is not None:
        start, end = m.span()
        if m.group("opener") is not None:
            if last_closer < start + 2:  # "/*/" does not close itself
                at = start + 1
                continue
            end = sql.index("*/", start + 2) + 2
        pieces.append(sql[copied:start])
        pieces.append(" ")
        copied = at = end
    pieces.append(sql[copied:])
    return "".join(pieces)


def scan_unparsed(sql: str) -> tuple[bool, bool]:
    """(mutating, multiple statements) from the bare text, comments and strings blanked."""
    bare = _blank(sql)
    statements = [s for s in bare.split(";") if s.strip()]
    return bool(_MUTATING_RE.search(bare)), len(statements) > 1


# Words every SQL statement has at least one of; text with none of them is not SQL at all.
_SQL_WORDS = re.compile(
    r"\b(select|with|insert|update|delete|merge|create|drop|alter|truncate|grant|revoke|values|"
    r"show|describe|explain|call|exec|execute|copy|upsert|replace|from|table|pragma|use|set)\b",
    re.I,
)


def is_sql_text(sql: str) -> bool:
    """Whether unparsed text is still SQL (a dialect sqlglot lacks, a typo) rather than prose such
    as an agent's apology: a statement keyword outside comments and strings."""
    return _SQL_WORDS.search(_blank(sql)) is not None
