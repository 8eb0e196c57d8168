"""Enrichment stage: does Qe keep every constraint of Qu and add none the rules do not justify?

Compares the literal values (quoted strings, numbers, years, quarters, dates) of the user's
question and of the agent's rewrite: a dropped value is major drift, an added one minor drift.
"""

from __future__ import annotations

from stef.models import Enrichment, EnrichmentStatus
from stef.question import in_words, question_literals
from stef.rules import AppRules


def _value_set(text: str) -> dict[str, str]:
    # A period relative to now ("this year") is no value: a rewrite may name its year.
    return {f.value: f.text for f in question_literals(text) if f.kind not in ("entity", "period")}


def enrichment(question: str, enriched: str | None, rules: AppRules) -> Enrichment:
    """Does Qe keep every constraint of Qu and add none the rules do not justify?"""
    if enriched is None:
        return Enrichment(status=EnrichmentStatus.MISSING)
    q_vals = _value_set(question)
    e_vals = _value_set(enriched)
    e_text = enriched.casefold()
    # Whole words: 12 is not kept by 120, nor 'EU' by 'Europe'.
    dropped = [text for v, text in q_vals.items() if v not in e_vals and not in_words(v, e_text)]
    justified = rules.justification
    q_text = question.casefold()
    added = [
        text
        for v, text in e_vals.items()
        if v not in q_vals and not in_words(v, q_text) and not in_words(v, justified)
    ]
    if dropped:
        status = EnrichmentStatus.MAJOR_DRIFT
    elif added:
        status = EnrichmentStatus.MINOR_DRIFT
    else:
        status = EnrichmentStatus.FAITHFUL
    return Enrichment(status=status, dropped=dropped, added=added)
