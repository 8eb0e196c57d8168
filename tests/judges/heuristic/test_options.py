"""The heuristic judge's opt-in readings (HeuristicOptions): off by default, each changes what
it names."""

from __future__ import annotations

from stef.judges.base import JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge, HeuristicOptions
from stef.models import InputRecord
from stef.rules import AppRules
from stef.stages.sqlspec import sqlspec

QUESTION = "How many patients have a normal proteinuria level?"
ENRICHED = f"{QUESTION} normal proteinuria level refers to `U-PRO` < 30"
SQL = "SELECT COUNT(*) FROM laboratory WHERE `U-PRO` < 30"


def _filters(
    options: HeuristicOptions | None, enriched: str = ENRICHED, sql: str = SQL
) -> list[tuple[str, str]]:
    record = InputRecord(id="r", question=QUESTION, sql=sql, enriched_question=enriched)
    request = JudgeRequest(
        record=record,
        sql_spec=sqlspec(sql, "sqlite"),
        rules=AppRules(),
        normalizations=[],
        notes=[],
        flags=[],
    )
    out = HeuristicJudge(options).judge(request).output
    status = {m.filter: m.status for m in out.filter_matches}
    return [(f.rhs, status[i]) for i, f in enumerate(out.question_spec.filters)]


def test_by_default_a_backticked_column_of_the_enrichment_is_read_as_a_value() -> None:
    assert _filters(None) == [("u-pro", "missing"), ("30", "matched")]


def test_backtick_names_reads_it_as_the_column_the_sql_uses() -> None:
    assert _filters(HeuristicOptions(backtick_names=True)) == [("30", "matched")]


def test_backtick_names_reads_a_column_the_sql_qualifies_with_an_alias() -> None:
    """``T1.alb``: the name after an alias ending in a digit is still the column (it is no
    number's decimals, as ``12`` is in "1.12")."""
    enriched = f"{QUESTION} normal level refers to `ALB` < 30"
    sql = "SELECT COUNT(*) FROM laboratory AS T1 WHERE T1.ALB < 30"
    assert _filters(HeuristicOptions(backtick_names=True), enriched, sql) == [("30", "matched")]


def test_a_backticked_phrase_the_sql_does_not_name_stays_a_value() -> None:
    """Only a phrase the SQL uses as a name is skipped: `back office` here is a value."""
    record = InputRecord(
        id="r", question="Orders from `back office`", sql="SELECT * FROM o WHERE dept = 'x'"
    )
    request = JudgeRequest(
        record=record,
        sql_spec=sqlspec(record.sql, "sqlite"),
        rules=AppRules(),
        normalizations=[],
        notes=[],
        flags=[],
    )
    out = HeuristicJudge(HeuristicOptions(backtick_names=True)).judge(request).output
    assert [f.rhs for f in out.question_spec.filters] == ["back office"]


def _judge(
    question: str, sql: str, options: HeuristicOptions, enriched: str | None = None
) -> tuple[str, list[str], str]:
    record = InputRecord(id="r", question=question, sql=sql, enriched_question=enriched)
    request = JudgeRequest(
        record=record,
        sql_spec=sqlspec(sql, "sqlite"),
        rules=AppRules(),
        normalizations=[],
        notes=[],
        flags=[],
    )
    out = HeuristicJudge(options).judge(request).output
    return out.verdict.value, list(out.issues), out.rationale


def test_operator_mismatch_is_off_by_default() -> None:
    question, sql = "Customers with more than 3 orders", "SELECT id FROM c WHERE n >= 3"
    assert _judge(question, sql, HeuristicOptions())[:2] == ("Correct", ["none"])
    verdict, issues, rationale = _judge(question, sql, HeuristicOptions(operator_mismatch=True))
    assert (verdict, issues) == ("Potentially Incorrect", ["filters_incorrect"])
    assert "wrong operator for 3 (>; the SQL has >=)" in rationale


def test_operator_mismatch_leaves_the_same_operator_alone() -> None:
    options = HeuristicOptions(operator_mismatch=True)
    question, sql = "Customers with at least 3 orders", "SELECT id FROM c WHERE n >= 3"
    assert _judge(question, sql, options)[:2] == ("Correct", ["none"])


def test_enrichment_distinct_is_off_by_default() -> None:
    question = "Which cities have customers?"
    enriched = f"{question} list each city once: distinct city"
    sql = "SELECT city FROM customers"
    assert _judge(question, sql, HeuristicOptions(), enriched)[:2] == ("Correct", ["none"])
    on = HeuristicOptions(enrichment_distinct=True)
    assert _judge(question, sql, on, enriched)[:2] == ("Potentially Incorrect", ["columns_wrong"])
    assert _judge(question, "SELECT DISTINCT city FROM customers", on, enriched)[0] == "Correct"
