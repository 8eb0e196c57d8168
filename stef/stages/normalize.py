"""Normalization stage: the four production rules of the paper (§5) and the review flags.

Each rule that fires is named in the result's ``normalizations``; each condition worth a look is a
``flag``. The question cues the rules need (does Qu ask for ordering, for a top-k?) are read
deterministically from the user's question, never from the SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stef.models import InputRecord, SqlSpec
from stef.rules import AppRules

_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "fifty": 50,
    "hundred": 100,
}
_NUM = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_SUPERLATIVES = (
    r"highest|lowest|most|least|largest|smallest|biggest|best|worst|greatest|fewest|earliest|"
    r"latest|oldest|newest|youngest|longest|shortest|maximum|minimum|max|min|top|bottom|"
    r"cheapest|priciest|fastest|slowest|heaviest|lightest|tallest|shortest|richest|poorest"
)
_ORDERING_WORDS = re.compile(
    r"\b(top|bottom|rank(ed|ing|s)?|sort(ed|ing)?|order(ed)? by|in (descending|ascending|"
    r"alphabetical|chronological|reverse) order|descending|ascending|alphabetical(ly)?|"
    r"chronological(ly)?|" + _SUPERLATIVES + r"|\w+est)\b",
    re.I,
)
_NOT_SUPERLATIVE_EST = {
    "interest",
    "rest",
    "test",
    "west",
    "request",
    "guest",
    "contest",
    "forest",
    "harvest",
    "nest",
    "honest",
    "modest",
    "suggest",
    "digest",
    "invest",
    "protest",
    "quest",
    "chest",
    "pest",
    "manifest",
    "arrest",
    "crest",
    "vest",
    "priest",
    "southwest",
    "northwest",
    "midwest",
    "est",
    "pretest",
    "unrest",
    "conquest",
    "inquest",
    "bequest",
    "tempest",
}
_TOP_K = re.compile(
    r"\b(?:top|first|bottom|last|best|worst)\s+"
    + _NUM
    + r"\b|\b"
    + _NUM
    + r"\s+(?:"
    + _SUPERLATIVES
    + r")\b",
    re.I,
)
_SINGULAR_SUPERLATIVE = re.compile(
    r"\b(?:the|which|what|who)\b[^.?!]*?\b(?:" + _SUPERLATIVES + r"|\w+est)\b", re.I
)


@dataclass(frozen=True)
class QuestionCues:
    """What the user's question says about ordering and top-k, read from its words."""

    ordering_requested: bool
    top_k: int | None
    superlative: bool


def _to_int(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS.get(word.casefold())


def question_cues(question: str) -> QuestionCues:
    """Ordering and top-k requests in a question ("top 10", "highest", "sorted by")."""
    ordering = False
    superlative = False
    for m in _ORDERING_WORDS.finditer(question):
        word = m.group(0).casefold()
        if word in _NOT_SUPERLATIVE_EST:
            continue
        if word in ("latest", "best") and not re.search(r"\b(the|most)\s+" + word, question, re.I):
            continue
        ordering = True
        if re.fullmatch(_SUPERLATIVES + r"|\w+est", word):
            superlative = True
    top_k = None
    k = _TOP_K.search(question)
    if k is not None:
        top_k = _to_int(k.group(1) or k.group(2))
        ordering = True
    elif superlative and _SINGULAR_SUPERLATIVE.search(question):
        top_k = 1
    return QuestionCues(ordering, top_k, superlative)


@dataclass(frozen=True)
class Normalized:
    """What the normalization stage decided for one record."""

    normalizations: list[str]
    flags: list[str]
    notes: list[str]
    cues: QuestionCues
    benign_group_by: list[str] = field(default_factory=list)
    required_group_by: bool = False
    default_order_by: bool = False
    safety_limit: bool = False


def _is_aggregate_term(term: str, spec: SqlSpec) -> bool:
    aggregated = {
        p for p, agg in zip(spec.projections, spec.projection_aggregated, strict=False) if agg
    }
    if term in aggregated:
        return True
    return any(term.startswith(a.func.casefold() + "(") for a in spec.aggregations)


def normalize(record: InputRecord, spec: SqlSpec, rules: AppRules) -> Normalized:
    """Apply the production normalization rules (SPEC §2) to one record's SQL spec."""
    cues = question_cues(record.question)
    names: list[str] = []
    notes: list[str] = []
    flags: list[str] = []

    # 1. Required GROUP BY: aggregates mixed with plain columns that GROUP BY covers.
    plain = [
        p for p, agg in zip(spec.projections, spec.projection_aggregated, strict=False) if not agg
    ]
    required = bool(
        spec.group_by
        and plain
        and any(spec.projection_aggregated)
        and set(plain) <= set(spec.group_by)
    )
    if required:
        names.append("required_group_by")
        notes.append(
            "required_group_by: the SELECT mixes aggregates with plain columns and GROUP BY "
            f"covers them ({', '.join(spec.group_by)}); this is not an unrequested grouping."
        )

    # 2. Benign GROUP BY: a grouping column pinned to one literal by WHERE.
    pinned = {
        p.lhs
        for p in spec.filters
        if p.clause in ("where", "join") and p.op in ("=", "like") and len(p.values) == 1
    }
    benign = [g for g in spec.group_by if g in pinned]
    if benign:
        names.append("benign_group_by")
        notes.append(
            "benign_group_by: GROUP BY "
            f"{', '.join(benign)} is pinned to a single value by WHERE; left out of grouping "
            "alignment."
        )

    # 3. Default ORDER BY: unrequested ordering by an aggregate (DESC) or a dimension (ASC).
    default_order = False
    if spec.order_by and not cues.ordering_requested and cues.top_k is None:
        default_order = all(
            (o.direction == "desc" and _is_aggregate_term(o.expr, spec))
            or (o.direction == "asc" and o.expr in spec.group_by)
            for o in spec.order_by
        )
    if default_order:
        names.append("default_order_by")
        notes.append(
            "default_order_by: the question asks for no ordering; ORDER BY "
            f"{', '.join(f'{o.expr} {o.direction}' for o in spec.order_by)} is a presentation "
            "default and is not penalized."
        )

    # 4. Safety LIMIT: a large LIMIT with no top-k request is not a top-k constraint.
    safety = False
    if spec.limit is not None and cues.top_k is None and not cues.superlative:
        if spec.limit >= rules.limit_min:
            safety = True
            names.append("safety_limit")
            notes.append(
                f"safety_limit: LIMIT {spec.limit} >= limit_min {rules.limit_min} and the question "
                "asks for no top-k; it is a safety cap, not a top-k constraint."
            )
        else:
            flags.append("limit_below_min")
            notes.append(
                f"limit_below_min: LIMIT {spec.limit} < limit_min {rules.limit_min} although the "
                "question asks for no top-k; check whether it truncates the answer."
            )

    if not spec.parsed:
        flags.append("unparsed_sql")
        notes.append(f"unparsed_sql: sqlglot could not parse the SQL ({spec.parse_error}).")
    if record.enriched_question is None:
        flags.append("enrichment_missing")
    if spec.has_cte:
        flags.append("cte")
    if spec.has_subquery:
        flags.append("subquery")
    if spec.has_window:
        flags.append("window_function")
    if spec.has_set_operation:
        flags.append("set_operation")
    return Normalized(
        normalizations=names,
        flags=flags,
        notes=notes,
        cues=cues,
        benign_group_by=benign,
        required_group_by=required,
        default_order_by=default_order,
        safety_limit=safety,
    )
