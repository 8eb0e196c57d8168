"""Normalization stage: the four production rules of the paper (§5) and the review flags.

Each rule that fires is named in the result's ``normalizations``; each condition worth a look is a
``flag``. The question cues the rules need (does Qu ask for ordering, for a top-k?) are read
deterministically from the user's question, never from the SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from stef.cues import cued
from stef.models import InputRecord, SqlSpec
from stef.question import TIME_UNITS
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
# "at least 10", "at most 5", "at best", "at worst": a bound or a hedge, no superlative ("at
# highest risk" is one).
_NOT_AFTER_AT = r"(?!(?<=\bat )(?:least|most|best|worst)\b)"
_ORDERING_WORDS = cued(
    _NOT_AFTER_AT
    + r"\b(top|bottom|rank(ed|ing|s)?|sort(ed|ing)?|order(ed)? by|in (descending|ascending|"
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
# "last 30 days" and "the first 3 months" are time windows (filters), not top-k requests.
_TOP_K = cued(
    r"\b(?:top|bottom|best|worst)\s+"
    + _NUM
    + r"\b|\b(?:first|last)\s+"
    + _NUM
    + r"\b(?!\s+"
    + TIME_UNITS
    + r"\b)|\b"
    + _NUM
    + r"\s+(?:"
    + _SUPERLATIVES
    + r")\b|\b(?<!at )(?<!no )(?:"
    + _SUPERLATIVES
    + r")\s+"
    + _NUM
    + r"\b(?!\s+"
    + TIME_UNITS
    + r"\b)",
    re.I,
)
# "Which 3 customers placed the most orders?": a count before the noun a superlative ranks.
_COUNTED = re.compile(
    r"\b(?:which|what|the|list|show|name|find|get|give\s+me)\s+(?:the\s+)?"
    + _NUM
    + r"\s+(?!"
    + TIME_UNITS
    + r"\b)[a-z]",
    re.I,
)
# "List 5 customers", "give me three examples", "list down at least five superpowers": a number
# of rows asked for, which a LIMIT of that number keeps (no ranking asked: no top-k).
_ROWS_ASKED = cued(
    r"\b(?:list|show|name|give|find|get|return|display|provide|fetch|pick)\s+"
    r"(?:(?:down|out|me|us)\s+)?(?:(?:at least|any|some|just|only)\s+)?"
    + _NUM
    + r"\s+(?!"
    + TIME_UNITS
    + r"\b)[a-z]",
    re.I,
)
_SUPERLATIVE_WORD = re.compile(_SUPERLATIVES + r"|\w+est")
# The words a singular superlative is read from ("which store had the highest sales?"): sentence
# ends, the words that open one, superlatives. Scanned once, word by word: one regex with a lazy
# gap between opener and superlative rescanned the rest of the sentence from every "the".
_SINGULAR_WORDS = re.compile(
    r"(?P<end>[.?!])|\b(?P<opener>the|which|what|who)\b|"
    + _NOT_AFTER_AT
    + r"\b(?:"
    + _SUPERLATIVES
    + r"|\w+est)\b",
    re.I,
)


# "the first European Grand Prix", "who was the last to edit": an ordinal that picks one, not
# a name part ("first name"), a time window ("the last 3 days", "last year") or a count.
_FIRST_OR_LAST = re.compile(
    r"\b(?:the|which|what|whose|his|her|its|their)\s+(?:very\s+)?(?:first|last)\b"
    r"(?![\s-]+(?:and|or|name|names|half|few|known|time|times|class|place|round|leg|lap|"
    + _NUM
    + r"|"
    + TIME_UNITS
    + r")\b)",
    re.I,
)


@dataclass(frozen=True)
class QuestionCues:
    """What the user's question says about ordering, top-k and how many rows it lists, read from
    its words."""

    ordering_requested: bool
    top_k: int | None
    superlative: bool
    rows: int | None = None


def _to_int(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS.get(word.casefold())


def _singular_superlative(question: str) -> bool:
    """Whether a superlative follows "the", "which", "what" or "who" in the same sentence."""
    opened = False
    for m in _SINGULAR_WORDS.finditer(question):
        if m.group("end") is not None:
            opened = False
        elif m.group("opener") is not None:
            opened = True
        elif opened:
            return True
    return False


@lru_cache(maxsize=1024)
def question_cues(question: str) -> QuestionCues:
    """Ordering and top-k requests in a question ("top 10", "highest", "sorted by").

    Cached: normalization and the heuristic judge both read the cues of the same question (the
    cues are a frozen value of the text alone)."""
    ordering = False
    superlative = False
    # "latest" / "best" order only when the question says "the latest" or "most latest"
    # somewhere: one search per word, not one per occurrence.
    qualified: dict[str, bool] = {}
    for m in _ORDERING_WORDS.finditer(question):
        word = m.group(0).casefold()
        if word in _NOT_SUPERLATIVE_EST:
            continue
        if word in ("latest", "best"):
            if word not in qualified:
                found = re.search(r"\b(the|most)\s+" + word, question, re.I)
                qualified[word] = found is not None
            if not qualified[word]:
                continue
        ordering = True
        if _SUPERLATIVE_WORD.fullmatch(word):
            superlative = True
    return _with_top_k(question, ordering, superlative)


def _with_top_k(question: str, ordering: bool, superlative: bool) -> QuestionCues:
    """The cues with the count the question ranks: "top 10", "which 3 ... the most", a
    singular superlative or "the first / the last <thing>" (1), else none."""
    top_k = None
    k = _TOP_K.search(question)
    counted = _COUNTED.search(question) if superlative and k is None else None
    if k is not None:
        top_k = _to_int(next(g for g in k.groups() if g is not None))
        ordering = True
    elif counted is not None:
        top_k = _to_int(counted.group(1))
    elif superlative and _singular_superlative(question):
        top_k = 1
    elif _FIRST_OR_LAST.search(question):
        ordering, superlative, top_k = True, True, 1
    asked = _ROWS_ASKED.search(question)
    rows = _to_int(asked.group(1)) if asked is not None else None
    return QuestionCues(ordering, top_k, superlative, rows)


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


@dataclass(frozen=True)
class _Finding:
    """A rule that fired (a normalization) or a condition worth a look (a flag)."""

    name: str
    note: str | None = None
    normalization: bool = True


def _required_group_by(spec: SqlSpec) -> _Finding | None:
    """Rule 1: aggregates mixed with plain columns that GROUP BY covers."""
    plain = [
        p for p, agg in zip(spec.projections, spec.projection_aggregated, strict=False) if not agg
    ]
    if not (
        spec.group_by
        and plain
        and any(spec.projection_aggregated)
        and set(plain) <= set(spec.group_by)
    ):
        return None
    return _Finding(
        "required_group_by",
        "required_group_by: the SELECT mixes aggregates with plain columns and GROUP BY "
        f"covers them ({', '.join(spec.group_by)}); this is not an unrequested grouping.",
    )


def _pinned_group_by(spec: SqlSpec) -> list[str]:
    """GROUP BY terms that WHERE (or a join condition) pins to one literal."""
    pinned = {
        p.lhs
        for p in spec.filters
        if p.clause in ("where", "join") and p.op in ("=", "like") and len(p.values) == 1
    }
    return [g for g in spec.group_by if g in pinned]


def _benign_group_by(benign: list[str]) -> _Finding | None:
    """Rule 2: a grouping column pinned to one literal by WHERE."""
    if not benign:
        return None
    return _Finding(
        "benign_group_by",
        "benign_group_by: GROUP BY "
        f"{', '.join(benign)} is pinned to a single value by WHERE; left out of grouping "
        "alignment.",
    )


def _default_order_by(spec: SqlSpec, cues: QuestionCues) -> _Finding | None:
    """Rule 3: unrequested ordering by an aggregate (DESC) or a dimension (ASC)."""
    if not spec.order_by or cues.ordering_requested or cues.top_k is not None:
        return None
    if not all(
        (o.direction == "desc" and _is_aggregate_term(o.expr, spec))
        or (o.direction == "asc" and o.expr in spec.group_by)
        for o in spec.order_by
    ):
        return None
    return _Finding(
        "default_order_by",
        "default_order_by: the question asks for no ordering; ORDER BY "
        f"{', '.join(f'{o.expr} {o.direction}' for o in spec.order_by)} is a presentation "
        "default and is not penalized.",
    )


def _safety_limit(spec: SqlSpec, cues: QuestionCues, rules: AppRules) -> _Finding | None:
    """Rule 4: a large LIMIT with no top-k request is a safety cap; a small one is flagged,
    unless it is the number of rows the question asks for ("list 5 customers": LIMIT 5)."""
    if spec.limit is None or cues.top_k is not None or cues.superlative:
        return None
    if cues.rows is not None and spec.limit == cues.rows:
        return None
    if spec.limit >= rules.limit_min:
        return _Finding(
            "safety_limit",
            f"safety_limit: LIMIT {spec.limit} >= limit_min {rules.limit_min} and the question "
            "asks for no top-k; it is a safety cap, not a top-k constraint.",
        )
    return _Finding(
        "limit_below_min",
        f"limit_below_min: LIMIT {spec.limit} < limit_min {rules.limit_min} although the "
        "question asks for no top-k; check whether it truncates the answer.",
        normalization=False,
    )


def _review_flags(record: InputRecord, spec: SqlSpec) -> list[_Finding]:
    """Conditions worth a look that no rule resolves."""
    flags = []
    if not spec.parsed:
        note = f"unparsed_sql: sqlglot could not parse the SQL ({spec.parse_error})."
        flags.append(_Finding("unparsed_sql", note, normalization=False))
    for name, present in (
        ("enrichment_missing", record.enriched_question is None),
        ("cte", spec.has_cte),
        ("subquery", spec.has_subquery),
        ("window_function", spec.has_window),
        ("set_operation", spec.has_set_operation),
    ):
        if present:
            flags.append(_Finding(name, normalization=False))
    return flags


def normalize(record: InputRecord, spec: SqlSpec, rules: AppRules) -> Normalized:
    """Apply the production normalization rules (SPEC §2) to one record's SQL spec."""
    cues = question_cues(record.question)
    benign = _pinned_group_by(spec)
    rules_fired = (
        _required_group_by(spec),
        _benign_group_by(benign),
        _default_order_by(spec, cues),
        _safety_limit(spec, cues, rules),
    )
    findings = [f for f in rules_fired if f is not None] + _review_flags(record, spec)
    names = [f.name for f in findings if f.normalization]
    return Normalized(
        normalizations=names,
        flags=[f.name for f in findings if not f.normalization],
        notes=[f.note for f in findings if f.note is not None],
        cues=cues,
        benign_group_by=benign,
        required_group_by="required_group_by" in names,
        default_order_by="default_order_by" in names,
        safety_limit="safety_limit" in names,
    )
