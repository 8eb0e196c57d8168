"""What the app's rules call defaults is left out of both queries before the reference
comparison: a safety LIMIT, benign filters, predicates on ignored columns."""

from __future__ import annotations

import pytest

from stef.models import Reference, Verdict
from stef.rules import AppRules
from stef.stages.reference_generated import Generated, run_generated
from stef.stages.reference_rules import without_app_defaults
from stef.stages.sqlspec import sqlspec

RULES = AppRules(benign_filters=["status = 'active'"], ignore_filters=["tenant_id"], limit_min=1000)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT a FROM t WHERE x = 1 LIMIT 1000", "SELECT a FROM t WHERE x = 1"),
        ("SELECT a FROM t WHERE x = 1 LIMIT 5", "SELECT a FROM t WHERE x = 1 LIMIT 5"),
        (
            "SELECT a FROM t WHERE tenant_id = 42 AND x = 1 AND status = 'active'",
            "SELECT a FROM t WHERE x = 1",
        ),
        ("SELECT a FROM t WHERE tenant_id = 42", "SELECT a FROM t"),
        ("SELECT a FROM t WHERE status = 'closed'", "SELECT a FROM t WHERE status = 'closed'"),
        ("SELEC a FROM", "SELEC a FROM"),  # unreadable: as it is
        (
            "SELECT a FROM t UNION SELECT a FROM u LIMIT 5000",
            "SELECT a FROM t UNION SELECT a FROM u LIMIT 5000",
        ),
    ],
)
def test_app_defaults_are_left_out(sql: str, expected: str) -> None:
    assert without_app_defaults(sql, None, RULES) == expected


def test_a_query_without_defaults_is_returned_as_written() -> None:
    sql = "select  a from t where x = 1"
    assert without_app_defaults(sql, None, RULES) == sql


def test_schema_qualified_tables_and_year_run_on_generated_databases() -> None:
    """Production SQL names ``schema.table`` and Snowflake's YEAR(): both run on the generated
    SQLite databases, and a wrong year is told apart by a counterexample."""
    gold = "SELECT SUM(amount) FROM sales.orders WHERE YEAR(order_date) = 2024"
    wrong = "SELECT SUM(amount) FROM sales.orders WHERE YEAR(order_date) = 2023"
    structural = Reference(verdict=Verdict.INCORRECT, p_correct=0.1, decided_by="structure")
    ref = run_generated(
        structural, sqlspec(wrong, "snowflake"), wrong, gold, "snowflake", False, Generated()
    )
    assert ref.decided_by == "execution", ref.error
    assert ref.verdict is Verdict.INCORRECT
