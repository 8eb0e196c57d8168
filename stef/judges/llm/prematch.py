"""Deterministic alignment before the LLM: question values that are literals of SQL predicates.

A value the question states (a quoted string, a date, a year, a number, a capitalized name) that
is, after folding, a literal value of a predicate with a compatible operator is matched by STEF;
the prompt lists those as settled and the model is asked only about the rest of the question.
"""

from __future__ import annotations

from stef.judges.base import JudgeRequest
from stef.judges.llm.reply import StefMatch
from stef.models import Predicate, QuestionFilter
from stef.question import question_literals
from stef.stages.verify import fold_value

# A quarter ("Q3") is written in SQL as a date range or a number: the model decides it.
_KINDS = ("value", "date", "year", "number", "entity")
# The predicate operators that apply "= value" as the question states it.
_EQUALITY = ("=", "in", "like")


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
