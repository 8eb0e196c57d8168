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


def _filters(options: HeuristicOptions | None) -> list[tuple[str, str]]:
    record = InputRecord(id="r", question=QUESTION, sql=SQL, enriched_question=ENRICHED)
    request = JudgeRequest(
        record=record,
        sql_spec=sqlspec(SQL, "sqlite"),
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
