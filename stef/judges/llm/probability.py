"""Probability mode (``llm.verdict: probability``): the deterministic judge reads the question and
matches its filters; the model is asked one short Yes/No question, and P(Yes) decides the verdict.

The prompt holds the question, the enriched question, the SQL, the app rules that are set, and what
STEF's checks found (each question filter and the predicates that match it, the heuristic's
findings): a few hundred tokens instead of a few thousand, and one token back. The result's
question spec, filter matches and enrichment are the heuristic judge's; the verdict and the
confidence come from p = P(Yes) / (P(Yes) + P(No)), kept as ``token_probability``.
"""

from __future__ import annotations

import re
from typing import Any

from stef.judges.base import JudgeRequest
from stef.models import JudgeOutput, Verdict
from stef.question import in_words

SYSTEM_TEMPLATE = "probability_system.j2"
USER_TEMPLATE = "probability_user.j2"
TEMPLATES = (SYSTEM_TEMPLATE, USER_TEMPLATE)

# One word back, with room for a leading space or quote before it (yes_probability looks there).
MAX_TOKENS = 3

# P(Yes) at or above each bound gives the verdict beside it: the four labels split p in four, so
# the score keeps the model's ordering instead of a pass/fail step.
_VERDICT_BOUNDS = (
    (0.9, Verdict.CORRECT),
    (0.5, Verdict.LIKELY_CORRECT),
    (0.1, Verdict.POTENTIALLY_INCORRECT),
)
# The leading name of a rule's filter text ("is_spam = false" -> is_spam).
_LEADING_NAME = re.compile(r"\s*([A-Za-z_][\w.]*)")
# The names a query writes: every run of word characters (``t1.status`` -> t1, status).
_NAME = re.compile(r"\w+")
_WORD = re.compile(r"[^\W\d_][\w]*")


def probability_context(request: JudgeRequest, heuristic: JudgeOutput) -> dict[str, Any]:
    """The template variables of one request: JSON-able data only.

    Args:
        request: the record and its analysis.
        heuristic: the deterministic judge's output for the same request (its filter matches and
            findings are listed as STEF's checks).
    """
    record = request.record
    return {
        "question": record.question,
        "enriched_question": record.enriched_question,
        "sql": record.sql,
        "rules": relevant_rules(request),
        "checks": checks(request, heuristic),
    }


def relevant_rules(request: JudgeRequest) -> dict[str, Any]:
    """The app rules that touch this record: the column mappings whose term is in the question,
    the benign and ignored filters on columns the SQL names, and the notes that share a word with
    the question. Empty ones are left out (every token of the prompt is paid on every record)."""
    rules, record = request.rules, request.record
    words = f"{record.question} {record.enriched_question or ''}".casefold()
    # The query's names as a set: a column is named whatever qualifies it. Searched for as a
    # value, ``status`` was not in ``t1.status`` (after "1." it read as a number's decimals),
    # and a filter on a column every BIRD-style query qualifies so never reached the prompt.
    names = set(_NAME.findall(record.sql.casefold()))

    def in_sql(text: str) -> bool:
        m = _LEADING_NAME.match(text)
        return m is not None and m.group(1).casefold().rsplit(".", 1)[-1] in names

    out: dict[str, Any] = {
        "column_mappings": {
            term: col
            for term, col in rules.column_mappings.items()
            if in_words(term.casefold(), words)
        },
        "benign_filters": [f for f in rules.benign_filters if in_sql(f)],
        "ignore_filters": [f for f in rules.ignore_filters if in_sql(f)],
        "notes": [n for n in rules.notes if _shares_a_word(n, words)],
    }
    return {k: v for k, v in out.items() if v}


def _shares_a_word(note: str, text: str) -> bool:
    """A note that names something of this record (a word of four letters or more)."""
    return any(len(w) >= 4 and in_words(w, text) for w in _WORD.findall(note.casefold()))


def checks(request: JudgeRequest, heuristic: JudgeOutput) -> list[str]:
    """What STEF's deterministic reading found, one short line each: every question filter with
    its status and the SQL predicates behind it, the conditions flagged, the issues found."""
    preds = {p.id: p.text for p in request.sql_spec.filters}
    filters = heuristic.question_spec.filters
    out: list[str] = []
    for m in heuristic.filter_matches:
        if m.filter >= len(filters):
            continue
        f = filters[m.filter]
        label = f.text or f.rhs
        # A match's predicate repeats the value; a mismatch's shows what the SQL has instead.
        shown = "; ".join(preds[i] for i in m.predicates if i in preds)
        out.append(
            f"{label!r} {m.status}" + (f": {shown}" if shown and m.status != "matched" else "")
        )
    out += [f"flag: {flag}" for flag in request.flags]
    issues = [i for i in heuristic.issues if i != "none"]
    if issues:
        out.append(f"issues: {', '.join(issues)}")
    return out


def verdict_of(p: float) -> Verdict:
    """The verdict of P(Yes)."""
    for bound, verdict in _VERDICT_BOUNDS:
        if p >= bound:
            return verdict
    return Verdict.INCORRECT


def probability_output(heuristic: JudgeOutput, p: float) -> JudgeOutput:
    """The judge output of one record: the heuristic's reading, the verdict of ``p``, and a
    confidence that is the model's own probability of that verdict's side."""
    verdict = verdict_of(p)
    passing = p >= 0.5
    return heuristic.model_copy(
        update={
            "verdict": verdict,
            "confidence": round(p if passing else 1.0 - p, 6),
            "token_probability": round(p, 6),
            "rationale": f"P(Yes) = {p:.3f} from the model's one-token answer; filters and "
            f"enrichment from STEF's deterministic reading ({heuristic.rationale})",
        }
    )
