"""Enrichment: does the agent's rewrite Qe keep every literal constraint of the question Qu
(a dropped one is major drift) and add none the rules do not justify (an added one is minor
drift)?"""

from __future__ import annotations

import pytest

from stef.judges.heuristic.enrichment import enrichment
from stef.models import Enrichment, EnrichmentStatus
from stef.rules import AppRules

NO_RULES = AppRules()


def test_missing_rewrite() -> None:
    assert enrichment("Sales in 2023", None, NO_RULES) == Enrichment(
        status=EnrichmentStatus.MISSING
    )


@pytest.mark.parametrize(
    ("question", "enriched"),
    [
        pytest.param("Sales in 2023", "Total sales for the year 2023", id="same-year"),
        pytest.param("Sales in 'EMEA' in Q3", "Sales in Q3 for the EMEA region", id="unquoted"),
        pytest.param("Revenue over 1,000", "Revenue above 1000", id="separator"),
        pytest.param("Revenue over 1000", "Revenue above 1,000", id="separator-added"),
        pytest.param("Sales on 2024-01-05", "All sales made on 2024-01-05", id="date"),
        pytest.param("Sales in 2023", "Sales in 2023, limited to 2023", id="repeated"),
        pytest.param("How many customers?", "Count all customers", id="no-values"),
    ],
)
def test_faithful(question: str, enriched: str) -> None:
    assert enrichment(question, enriched, NO_RULES) == Enrichment(status=EnrichmentStatus.FAITHFUL)


def test_dropped_constraint_is_major_drift() -> None:
    """The dropped value is named as the user wrote it."""
    result = enrichment("Sales in 2023 and 2024 in 'EMEA'", "Sales in 2023 in EMEA", NO_RULES)
    assert result == Enrichment(status=EnrichmentStatus.MAJOR_DRIFT, dropped=["2024"])


def test_changed_constraint_is_dropped_and_added() -> None:
    result = enrichment("Sales on 2024-01-05", "Sales on 2024-01-06", NO_RULES)
    assert result == Enrichment(
        status=EnrichmentStatus.MAJOR_DRIFT, dropped=["2024-01-05"], added=["2024-01-06"]
    )


def test_a_quarter_spelled_out_is_dropped() -> None:
    """Values are compared as written: "third quarter" does not keep "Q3"."""
    result = enrichment("Sales in Q3 2023", "Sales in the third quarter of 2023", NO_RULES)
    assert result.status is EnrichmentStatus.MAJOR_DRIFT
    assert result.dropped == ["Q3"]


def test_added_constraint_is_minor_drift() -> None:
    result = enrichment("Sales over 500", "Sales over 500 in 2024 for 'EU'", NO_RULES)
    assert result.status is EnrichmentStatus.MINOR_DRIFT
    assert sorted(result.added) == ["2024", "EU"]
    assert result.dropped == []


def test_dropped_wins_over_added() -> None:
    result = enrichment("Sales in 2023", "Sales in Q1 for 'APAC'", NO_RULES)
    assert result.status is EnrichmentStatus.MAJOR_DRIFT
    assert result.dropped == ["2023"]
    assert sorted(result.added) == ["APAC", "Q1"]


@pytest.mark.parametrize(
    "rules",
    [
        pytest.param(AppRules(benign_filters=["status = 'active'"]), id="benign-filter"),
        pytest.param(AppRules(notes=["Only active accounts count."]), id="note"),
    ],
)
def test_a_value_the_rules_justify_is_no_drift(rules: AppRules) -> None:
    enriched = "Sales in 2023 with status 'active'"
    assert enrichment("Sales in 2023", enriched, NO_RULES).added == ["active"]
    assert enrichment("Sales in 2023", enriched, rules) == Enrichment(
        status=EnrichmentStatus.FAITHFUL
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("benign_filters", ["status = 'active'"], id="benign-filter"),
        pytest.param("notes", ["Only active accounts count."], id="note"),
    ],
)
def test_rules_copied_with_new_filters_or_notes_justify_by_the_new_ones(
    field: str, value: list[str]
) -> None:
    """The text that justifies an added value is built once per rules: a copy with other
    filters or notes (as a merged rules fragment makes) reads its own, not its original's."""
    enriched = "Sales in 2023 with status 'active'"
    before = AppRules(benign_filters=["region = 'EMEA'"], notes=["Fiscal years start in April."])
    after = before.model_copy(update={field: value})
    assert enrichment("Sales in 2023", enriched, before).added == ["active"]
    assert enrichment("Sales in 2023", enriched, after).status is EnrichmentStatus.FAITHFUL
    assert enrichment("Sales in 2023", enriched, after.model_copy(update={field: []})).added == [
        "active"
    ]


def test_names_are_not_compared() -> None:
    """Only literal values count: capitalized names are left to the judge's reading."""
    assert enrichment("Sales to Acme", "Sales to Globex", NO_RULES).status is (
        EnrichmentStatus.FAITHFUL
    )


def test_empty_rewrite_of_a_question_with_values_drops_them() -> None:
    result = enrichment("Sales in 2023", "", NO_RULES)
    assert result == Enrichment(status=EnrichmentStatus.MAJOR_DRIFT, dropped=["2023"])


def test_a_number_changed_by_a_digit_is_dropped() -> None:
    result = enrichment("Orders of more than 12 items", "Orders of more than 120 items", NO_RULES)
    assert result.status is EnrichmentStatus.MAJOR_DRIFT
    assert result.dropped == ["12"]


def test_a_quoted_value_inside_a_longer_word_is_dropped() -> None:
    result = enrichment("Sales in 'EU'", "Sales in 'Europe'", NO_RULES)
    assert result.status is EnrichmentStatus.MAJOR_DRIFT
