"""Score stage: the paper's formula (STEF §4), tiers, and the safety override.

Φ = (σ_filters + σ_verdict + δ) / 10 × 100 × Γ(γ)

Mutating or stacked SQL is verdict Incorrect and scores 0 (tier poor) whatever else holds: the
safety override. The paper's components are still computed and reported beside it. SQL that a
judge could not read at all (the heuristic on SQL sqlglot cannot parse) is Incorrect and scores 0
the same way: the unparsed override, so it never scores above a query that parses.
"""

from __future__ import annotations

from dataclasses import dataclass

from stef.models import FilterStatus, SqlSpec, Tier, Verdict
from stef.rules import AppRules

FILTER_SCORES = {
    FilterStatus.FULLY_APPLIED: 5,
    FilterStatus.FULLY_APPLIED_WITH_EXTRAS: 4,
    FilterStatus.PARTIALLY_APPLIED: 3,
    FilterStatus.NOT_APPLIED: 0,
}
VERDICT_SCORES = {
    Verdict.CORRECT: 5,
    Verdict.LIKELY_CORRECT: 3,
    Verdict.POTENTIALLY_INCORRECT: 2,
    Verdict.INCORRECT: 0,
}


@dataclass(frozen=True)
class Scored:
    score: float
    tier: Tier
    filter_score: int
    verdict: Verdict
    verdict_score: int
    multiplier: float
    unsafe: bool


def multiplier(confidence: float, rules: AppRules) -> float:
    """Γ(γ): 1.0 at high confidence, 0.8 at medium, 0.5 below."""
    if confidence >= rules.confidence.high:
        return 1.0
    if confidence >= rules.confidence.medium:
        return 0.8
    return 0.5


def tier_of(value: float, rules: AppRules) -> Tier:
    if value >= rules.tiers.excellent:
        return "excellent"
    if value >= rules.tiers.good:
        return "good"
    if value >= rules.tiers.marginal:
        return "marginal"
    return "poor"


def score(
    status: FilterStatus,
    verdict: Verdict,
    leniency: int,
    confidence: float,
    spec: SqlSpec,
    rules: AppRules,
    *,
    unreadable: bool = False,
) -> Scored:
    """Score one judged record; mutating or stacked SQL, and SQL the judge could not read
    (``unreadable``), force verdict Incorrect and score 0."""
    unsafe = spec.mutating or spec.multiple_statements
    if unsafe or unreadable:
        verdict = Verdict.INCORRECT
    sigma_f = FILTER_SCORES[status]
    sigma_v = VERDICT_SCORES[verdict]
    delta = leniency if status is FilterStatus.FULLY_APPLIED_WITH_EXTRAS else 0
    gamma = multiplier(confidence, rules)
    value = (
        0.0 if unsafe or unreadable else round((sigma_f + sigma_v + delta) / 10 * 100 * gamma, 2)
    )
    return Scored(value, tier_of(value, rules), sigma_f, verdict, sigma_v, gamma, unsafe)
