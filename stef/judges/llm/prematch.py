"""Deterministic alignment before the LLM: what STEF settles itself, and what it shows the model.

- A value the question states (a quoted string, a date, a year, a number, a capitalized name)
  that is, after folding, a literal value of a predicate with a compatible operator is matched by
  STEF (:func:`prematch`).
- A question filter that STEF's deterministic reading (the heuristic judge's question reader)
  finds contradicted by the SQL -- another period, the other direction of a comparison, a
  window of another length, a negation inverted, another value for the same column -- is
  mismatched by STEF (:func:`settle`).

The prompt lists both as settled and the model is asked only about the rest of the question; the
reading's structural findings (ordering direction, top-N count, a named aggregate, a requested
grouping) are shown to the model as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from stef.judges.base import JudgeRequest
from stef.judges.heuristic.judge import reading, replaced_filters
from stef.judges.llm.reply import StefMatch
from stef.models import FilterMatch, Issue, Predicate, QuestionFilter
from stef.question import question_literals
from stef.stages.verify import fold_value

# A quarter ("Q3") is written in SQL as a date range or a number: the model decides it.
_KINDS = ("value", "date", "year", "number", "entity")
# The predicate operators that apply "= value" as the question states it.
_EQUALITY = ("=", "in", "like")
# The reader's filter kinds whose contradiction STEF decides: the question's own values and
# the readings of its words (a window or period relative to now, a status word, a null test,
# an SQL value the question names, whose negation the SQL inverts). Capitalized phrases and
# the enrichment's values are left to the model.
_DECIDED = frozenset(
    {"value", "number", "year", "date", "quarter", "window", "period", "status", "null", "word"}
)
# The reader's structural findings shown to the model as evidence.
_SHOWN: frozenset[Issue] = frozenset(
    {"ordering_wrong", "limit_unrequested", "aggregation_wrong", "grouping_wrong"}
)


@dataclass(frozen=True)
class StefFinding:
    """A structural finding of STEF's deterministic reading, shown to the model."""

    issue: Issue
    evidence: str


@dataclass(frozen=True)
class Settled:
    """What STEF settles before asking: filters matched or contradicted, and its findings."""

    matches: tuple[StefMatch, ...]
    findings: tuple[StefFinding, ...] = ()


def _applies(op: str, value: str, pred: Predicate) -> bool:
    if pred.op != op and not (op == "=" and pred.op in _EQUALITY):
        return False
    return value in {fold_value(v) for v in pred.values}


def prematch(request: JudgeRequest) -> list[StefMatch]:
    """The question filters STEF matches itself, each with the predicates that apply it."""
    out: list[StefMatch] = []
    seen: set[str] = set()
    # In the order of the question's words, as the prompt lists them.
    for found in sorted(question_literals(request.record.question), key=lambda f: f.span):
        if found.kind not in _KINDS:
            continue
        # A capitalized phrase may run a value into the words around it ("Spend APAC"): its
        # words are tried one by one when the whole phrase is no literal.
        words = found.text.split() if found.kind == "entity" else []
        for text in [found.text, *(w for w in words if len(words) > 1)]:
            value = fold_value(found.value if text == found.text else text)
            if not value or value in seen:
                continue
            hits = tuple(p.id for p in request.sql_spec.filters if _applies(found.op, value, p))
            if hits:
                seen.add(value)
                qf = QuestionFilter(op=found.op, rhs=value, text=text, kind=found.kind)
                out.append(StefMatch(filter=qf, predicates=hits))
                break
    return out


def _contradicted(
    filters: list[QuestionFilter], matches: list[FilterMatch], guessed: frozenset[int]
) -> list[tuple[QuestionFilter, FilterMatch]]:
    """Mismatched filters the reading decided; a value only guessed replaced (a code the SQL
    may map it to: 'Germany' as ``country = 'DE'``) is left to the model."""
    return [
        (filters[m.filter], m)
        for m in matches
        if m.status == "mismatched"
        and m.predicates
        and filters[m.filter].kind in _DECIDED
        and m.filter not in guessed
    ]


def settle(request: JudgeRequest) -> Settled:
    """:func:`prematch`'s matches, the filters STEF's reading finds contradicted (a filter both
    matched by a literal and contradicted by its reading is contradicted), and the reading's
    structural findings."""
    if not request.sql_spec.parsed:
        return Settled(tuple(prematch(request)))
    qs, matches, findings = reading(request)
    wrong = [
        StefMatch(
            filter=QuestionFilter(op=f.op, rhs=f.rhs, text=f.text, kind=f.kind),
            predicates=tuple(m.predicates),
            status="mismatched",
        )
        for f, m in _contradicted(qs.filters, matches, replaced_filters(request))
    ]
    taken = {fold_value(m.filter.rhs) for m in wrong}
    matched = [m for m in prematch(request) if fold_value(m.filter.rhs) not in taken]
    shown = tuple(StefFinding(f.label, f.reason) for f in findings if f.label in _SHOWN)
    return Settled((*matched, *wrong), shown)
