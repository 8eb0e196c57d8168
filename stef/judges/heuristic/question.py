"""The heuristic judge's question spec Sq from the words of Qu.

Filter values come from :mod:`stef.question` (the question reader every stage shares); this
module adds what only the heuristic reads: aggregation words ("how many", "average", "total"),
grouping words ("per", "for each") and, through :func:`stef.stages.normalize.question_cues`,
ordering and top-k requests.
"""

from __future__ import annotations

import re

from stef.cues import Cued, cued
from stef.judges.heuristic.readings import negated_at
from stef.models import Aggregation, QuestionFilter, QuestionSpec, SqlSpec
from stef.question import Found, as_word, question_literals
from stef.rules import AppRules
from stef.sql.canonical import SQL_STRING, norm_ident
from stef.stages.normalize import question_cues

_AGG_CUES: tuple[tuple[Cued, str], ...] = (
    (cued(r"\bhow many\b|\bnumber of\b|\bcount\b|\bcounts\b", re.I), "COUNT"),
    (cued(r"\baverage\b|\bavg\b|\bmean\b", re.I), "AVG"),
    (cued(r"\btotal\b|\bsum\b|\bin all\b|\baltogether\b|\bcombined\b", re.I), "SUM"),
    (cued(r"\bmaximum\b|\bmax\b", re.I), "MAX"),
    (cued(r"\bminimum\b|\bmin\b", re.I), "MIN"),
)
DISTINCT_WORDS = cued(r"\bdistinct\b|\bdifferent\b|\bunique\b", re.I)
_BY_GROUP = re.compile(
    r"(?<!sorted )(?<!ordered )(?<!ranked )(?<!sort )(?<!order )(?<!rank )"
    r"\bby\s+(?:the\s+|their\s+|its\s+)?(\w+)",
    re.I,
)
_GROUPING = cued(
    r"\b(?:per|for each|for every|each|by each|broken down by|grouped by)\s+"
    r"(\w+)",
    re.I,
)


_QUARTER_BEFORE = re.compile(r"\bQ[1-4]\s+$")


def _mapping_lhs(text: str, f: Found, rules: AppRules) -> str | None:
    """A column for a question value when a mapped question term sits next to it."""
    if not rules.column_mappings:
        return None
    window = text[max(0, f.span[0] - 25) : f.span[1] + 25].casefold()
    for term, column in rules.column_mappings.items():
        if re.search(r"\b" + re.escape(term.casefold()) + r"s?\b", window):
            return norm_ident(column)
    return None


def _by_groups(question: str, spec: SqlSpec) -> list[str]:
    """ "revenue by region": a grouping when the SQL groups by that word's column.

    "by" also introduces sort keys and agents ("sorted by name", "made by Acme"), so the word
    only counts when a GROUP BY term of the SQL names it.
    """
    terms = " ".join(spec.group_by).casefold()
    if not terms:
        return []
    out = []
    for m in _BY_GROUP.finditer(question):
        word = m.group(1).casefold()
        stem = word[:-1] if word.endswith("s") and len(word) > 3 else word
        if len(stem) >= 2 and re.search(r"\b\w*" + re.escape(stem), terms):
            out.append(word)
    return out


def sql_names_text(sql: str) -> str:
    """The SQL with its string literals cut out, case-folded: where names are looked up."""
    return SQL_STRING.sub(" ", sql).casefold()


def is_quoted_name(f: Found, text: str, sql_names: str) -> bool:
    """A phrase in backticks that the SQL uses as a name, not as a string.

    Backticks quote identifiers (MySQL, SQLite, BigQuery), and enrichments write columns that
    way ("refers to `U-PRO` > 0"): read as a value, the column would be a filter no predicate
    has. Double quotes are left alone: questions quote values with them, and SQLite reads
    ``"text"`` as a string when no column has that name.
    """
    # Word bounds only: a name after ``T1.`` is no number's decimals (``in_words`` reads it so).
    return f.kind == "value" and text[f.span[0]] == "`" and as_word(f.value, sql_names)


def _filter_of(f: Found, question: str, rules: AppRules) -> QuestionFilter:
    """A question literal as a filter: negated after "not", "other than"; the year of "Q3 2024"
    carries its quarter in its text."""
    op, text = f.op, f.text
    if f.kind in ("value", "entity") and negated_at(question, f.span[0]):
        op = "!="  # "other than Sales", "excluding 'refund'"
    if f.kind == "year":
        before = question[max(0, f.span[0] - 8) : f.span[0]]
        quarter = _QUARTER_BEFORE.search(before)
        if quarter is not None:  # "Q3 2024": the year of a quarter
            text = question[f.span[0] - len(before) + quarter.start() : f.span[1]]
    # A period relative to now is on whichever date column the question means.
    lhs = _mapping_lhs(question, f, rules) if f.kind != "period" else None
    return QuestionFilter(lhs=lhs, op=op, rhs=f.value, text=text, kind=f.kind)


def question_spec(
    question: str, spec: SqlSpec, sql: str, rules: AppRules, *, backtick_names: bool = False
) -> tuple[QuestionSpec, list[str]]:
    """The question spec Sq read from the words of Qu, and the kind of each filter.

    Args:
        question: the user's question Qu.
        spec: the SQL spec (names the SQL uses, its GROUP BY).
        sql: the SQL text.
        rules: the app rules (column mappings).
        backtick_names: skip backtick-quoted phrases the SQL uses as names
            (:func:`is_quoted_name`); off by default, see
            :class:`stef.judges.heuristic.judge.HeuristicOptions`.
    """
    cues = question_cues(question)
    filters: list[QuestionFilter] = []
    kinds: list[str] = []
    sql_names = sql_names_text(sql)
    for f in question_literals(question):
        if backtick_names and is_quoted_name(f, question, sql_names):
            continue
        if f.kind == "entity":
            # A capitalized phrase the SQL uses as a name (table, column) is not a value.
            words = [w for w in re.split(r"\W+", f.value) if w]
            if words and all(w in sql_names for w in words):
                continue
        filters.append(_filter_of(f, question, rules))
        kinds.append(f.kind)
    aggregations = [
        Aggregation(func=func, column="*")
        for pattern, func in _AGG_CUES
        if pattern.search(question)
    ]
    if DISTINCT_WORDS.search(question):
        aggregations = [
            a.model_copy(update={"distinct": True}) if a.func == "COUNT" else a
            for a in aggregations
        ]
    group_by = [m.group(1).casefold() for m in _GROUPING.finditer(question)]
    group_by += [g for g in _by_groups(question, spec) if g not in group_by]
    return (
        QuestionSpec(
            outputs=[],
            aggregations=aggregations,
            filters=filters,
            group_by=group_by,
            ordering_requested=cues.ordering_requested,
            top_k=cues.top_k,
        ),
        kinds,
    )
