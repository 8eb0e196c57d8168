"""Score: the paper's formula, tiers, the confidence multiplier and the safety override."""

from __future__ import annotations

import pytest

from stef.models import FilterStatus, SqlSpec, Verdict
from stef.rules import AppRules
from stef.stages.score import score

F, V = FilterStatus, Verdict
SAFE = SqlSpec(statement_type="select")


@pytest.mark.parametrize(
    ("status", "verdict", "leniency", "confidence", "expected", "tier"),
    [
        (F.FULLY_APPLIED, V.CORRECT, 0, 0.9, 100.0, "excellent"),
        (F.FULLY_APPLIED_WITH_EXTRAS, V.CORRECT, 1, 0.9, 100.0, "excellent"),
        (F.FULLY_APPLIED_WITH_EXTRAS, V.CORRECT, 0, 0.9, 90.0, "excellent"),
        (F.FULLY_APPLIED_WITH_EXTRAS, V.LIKELY_CORRECT, 1, 0.9, 80.0, "good"),
        (F.FULLY_APPLIED, V.LIKELY_CORRECT, 0, 0.7, 64.0, "marginal"),
        (F.PARTIALLY_APPLIED, V.POTENTIALLY_INCORRECT, 0, 0.85, 50.0, "marginal"),
        (F.PARTIALLY_APPLIED, V.POTENTIALLY_INCORRECT, 0, 0.5, 25.0, "poor"),
        (F.NOT_APPLIED, V.INCORRECT, 0, 1.0, 0.0, "poor"),
        (F.NOT_APPLIED, V.CORRECT, 0, 0.65, 40.0, "poor"),
        (F.FULLY_APPLIED, V.POTENTIALLY_INCORRECT, 0, 0.649, 35.0, "poor"),
        # leniency only counts with extras
        (F.FULLY_APPLIED, V.CORRECT, 1, 0.9, 100.0, "excellent"),
        (F.PARTIALLY_APPLIED, V.CORRECT, 1, 0.9, 80.0, "good"),
    ],
)
def test_formula(
    status: FilterStatus,
    verdict: Verdict,
    leniency: int,
    confidence: float,
    expected: float,
    tier: str,
) -> None:
    s = score(status, verdict, leniency, confidence, SAFE, AppRules())
    assert (s.score, s.tier) == (expected, tier)


def test_unsafe_forces_incorrect() -> None:
    spec = SqlSpec(statement_type="delete", mutating=True)
    s = score(F.FULLY_APPLIED, V.CORRECT, 0, 0.9, spec, AppRules())
    # The safety override: score 0, tier poor; the paper's components stay beside it.
    assert (s.verdict, s.verdict_score, s.score, s.tier, s.unsafe) == (
        V.INCORRECT, 0, 0.0, "poor", True,
    )  # fmt: skip
    assert s.filter_score == 5
    stacked = SqlSpec(statement_type="select", multiple_statements=True)
    assert score(F.FULLY_APPLIED, V.CORRECT, 0, 0.9, stacked, AppRules()).verdict is V.INCORRECT


def test_app_tier_and_confidence_overrides() -> None:
    rules = AppRules.model_validate(
        {
            "tiers": {"excellent": 95, "good": 80, "marginal": 60},
            "confidence": {"high": 0.95, "medium": 0.9},
        }
    )
    s = score(F.FULLY_APPLIED_WITH_EXTRAS, V.CORRECT, 0, 0.92, SAFE, rules)
    assert (s.multiplier, s.score, s.tier) == (0.8, 72.0, "marginal")
