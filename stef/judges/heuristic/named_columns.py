"""Columns the enrichment names that the SQL never uses.

An enrichment that spells out the schema ("the best lap time refers to MIN(milliseconds)",
"full name refers to first_name, last_name", "`First Date`") says which column answers or
filters the question. SQL that mentions none of that column's spellings computes something
else: on the dev set, 39 of the 50 records where it fires are labelled wrong (12 of the 13
it takes from Correct). A name the question itself uses is left out (a value such as
``TR004_8_9``, written bare), and so is a near spelling (the enrichment's typos,
``covertedManaCost`` for ``convertedmanacost``, and a column inside a longer one).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

from stef.cues import cued
from stef.sql.canonical import SQL_STRING

# Names as enrichments write them: `quoted`, snake_case, camelCase, the column of table.column,
# and the argument of an aggregate (MIN(milliseconds)). Quoted strings are values, cut first.
_NAME = re.compile(
    r"`([^`]+)`"
    r"|(?<![\w.])([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b"
    r"|(?<![\w.])([a-z]+[A-Z][A-Za-z0-9]*)\b"
    r"|\b[A-Za-z_]\w*\.([A-Za-z_]\w*)\b"
)
_AGGREGATE_ARG = cued(r"\b(?:max|min|sum|avg|count)\s*\(\s*([A-Za-z_]\w*)\s*\)", re.I)
_TEXT_STRING = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"")
# Shorter names (id, name, time) are too common to tell one column from another; a longer
# backticked phrase is prose, not a column.
_MIN_NAME = 5
_MAX_NAME = 64
_KEYWORDS = frozenset({"current_timestamp", "current_date", "current_time", "localtime"})
# A near spelling: one name inside the other, or this similar (difflib's ratio).
_NEAR_RATIO = 0.85
_NEAR_LENGTH = 3
_NEAR_TRIES = 2000
_SQL_WORDS = re.compile(r"\w+")
_SQL_QUOTED = re.compile(r"`([^`]+)`|\"([^\"]+)\"|\[([^\]]+)\]")


def _names(enriched: str) -> set[str]:
    """The column names the enrichment writes, case-folded."""
    text = _TEXT_STRING.sub(" ", enriched)
    out = {next(g for g in m.groups() if g) for m in _NAME.finditer(text)}
    out |= {m.group(1) for m in _AGGREGATE_ARG.finditer(text)}
    return {n.strip().casefold() for n in out}


class _SqlNames:
    """Every word and quoted identifier of the SQL outside its string literals, case-folded,
    indexed for :meth:`uses`: a SQL of thousands of words is looked up, not scanned, per name."""

    def __init__(self, sql: str) -> None:
        bare = SQL_STRING.sub(" ", sql).casefold()
        # An enrichment writes values bare too (in_progress, iPhone): found in the SQL's strings
        # it is the value compared, not a column missed.
        self.strings = "\x00".join(SQL_STRING.findall(sql)).casefold()
        names = set(_SQL_WORDS.findall(bare))
        names |= {next(g for g in m.groups() if g) for m in _SQL_QUOTED.finditer(bare)}
        self.names = names
        self.squeezed = "\x00".join(n.replace("_", "") for n in names)
        self.parts = {tuple(sorted(n.split("_"))) for n in names if "_" in n}
        # Near spellings are looked for among the names of the same first two characters and
        # about the same length, at most _NEAR_TRIES comparisons a record.
        self.near: dict[tuple[str, int], list[str]] = {}
        for n in names:
            self.near.setdefault((n[:2], len(n)), []).append(n)
        self.tries = _NEAR_TRIES

    def uses(self, name: str) -> bool:
        """``name`` itself, its parts in another order (``received_date`` for
        ``date_received``), with or without underscores inside a longer name or holding one
        (``isPaid`` in ``is_paid_flag``), or a near spelling (``covertedManaCost``)."""
        if name in self.names or tuple(sorted(name.split("_"))) in self.parts:
            return True
        if name in self.strings:
            return True
        squeezed = name.replace("_", "")
        if squeezed in self.squeezed:
            return True
        size = len(name)
        if any(
            name[i:j] in self.names for i in range(size) for j in range(i + _MIN_NAME, size + 1)
        ):
            return True
        return self._near(name)

    def _near(self, name: str) -> bool:
        size = len(name)
        for length in range(size - _NEAR_LENGTH, size + _NEAR_LENGTH + 1):
            for other in self.near.get((name[:2], length), ()):
                if self.tries <= 0:
                    return True  # out of tries: not a finding
                self.tries -= 1
                near = difflib.SequenceMatcher(None, name, other)
                if near.quick_ratio() >= _NEAR_RATIO and near.ratio() >= _NEAR_RATIO:
                    return True
        return False


def unused_columns(question: str, enriched: str, sql: str) -> Iterator[str]:
    """The names the enrichment gives for columns that the SQL does not use, in order."""
    asked = question.casefold()
    sql_names: _SqlNames | None = None  # indexed once a name needs it (most records: none)
    for name in sorted(_names(enriched)):
        if not _MIN_NAME <= len(name) <= _MAX_NAME or name in _KEYWORDS or name in asked:
            continue
        sql_names = sql_names or _SqlNames(sql)
        if not sql_names.uses(name):
            yield name
