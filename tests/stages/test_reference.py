"""Reference mode through the record path: the ``reference`` field, its issues and score, the
references file, and the reference never reaching a reference-free judge."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from stef.errors import ConfigError
from stef.io.references import load_references
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo, Result, Verdict
from stef.pipeline import Pipeline, PipelineOptions
from stef.rules import load_rules
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import Settings
from stef.stages.reference import P_CORRECT

SECRET = "gold_secret_table"
RECORD = {
    "id": "r1",
    "question": "How many singers are from France?",
    "sql": "SELECT COUNT(*) FROM singer AS s WHERE s.country = 'France'",
}


class Recording:
    """The heuristic judge, keeping every request it was asked."""

    def __init__(self) -> None:
        self.inner = HeuristicJudge()
        self.seen: list[JudgeRequest] = []

    @property
    def info(self) -> JudgeInfo:
        return self.inner.info

    def judge(self, request: JudgeRequest) -> JudgeReply:
        self.seen.append(request)
        return self.inner.judge(request)

    def close(self) -> None:
        self.inner.close()


def _judge(pipeline: Pipeline, record: dict[str, Any]) -> Result:
    processed = pipeline.process(json.dumps(record).encode(), {"file": "t", "line": 1})
    assert processed.result is not None, processed.error
    return processed.result


# The heuristic alone is unsure of it (a filter of the question missing: marginal, 0.85).
UNSURE = {
    "id": "r2",
    "question": "List the singers from France older than 30",
    "sql": "SELECT name FROM singer WHERE country = 'France'",
}


def _structural() -> Pipeline:
    return Pipeline(load_rules(None), HeuristicJudge(), PipelineOptions(reference_generated=None))


def test_same_structure_is_correct_sets_the_score_and_can_be_excellent() -> None:
    without = _judge(_structural(), UNSURE)
    gold = "SELECT singer.name FROM singer WHERE singer.country = 'France'"
    result = _judge(_structural(), {**UNSURE, "gold_sql": gold})
    assert result.reference is not None
    assert result.reference.verdict is Verdict.CORRECT
    assert result.reference.differences == []
    assert result.reference.decided_by == "structure"
    assert without.score is not None and without.tier != "excellent"
    # A decisive reference is the score: a query equal to its gold can be excellent.
    assert result.score == 100 * P_CORRECT[Verdict.CORRECT]
    assert result.tier == "excellent"
    assert result.judge.p_correct == P_CORRECT[Verdict.CORRECT]
    assert result.components is not None
    assert result.components.confidence == P_CORRECT[Verdict.CORRECT]


def test_likely_correct_still_weighs_the_judge() -> None:
    without = _judge(_structural(), RECORD)
    gold = "SELECT COUNT(*) FROM singer WHERE country = 'France' AND name IS NOT NULL"
    result = _judge(_structural(), {**RECORD, "gold_sql": gold})
    assert result.reference is not None
    assert result.reference.verdict is Verdict.LIKELY_CORRECT
    assert without.score is not None
    expected = 0.25 * without.score + 0.75 * 100 * P_CORRECT[Verdict.LIKELY_CORRECT]
    assert result.score == round(expected, 2)


def test_needs_review_follows_the_reference_confidence() -> None:
    pipeline = Pipeline(
        load_rules(None),
        HeuristicJudge(),
        PipelineOptions(reference_generated=None, review_below=0.9),
    )
    alone = _judge(pipeline, UNSURE)
    gold = "SELECT singer.name FROM singer WHERE singer.country = 'France'"
    referenced = _judge(pipeline, {**UNSURE, "gold_sql": gold})
    assert alone.needs_review
    assert not referenced.needs_review


def test_differences_are_listed_and_become_issues() -> None:
    gold = "SELECT COUNT(DISTINCT name) FROM singer WHERE country = 'Germany'"
    result = _judge(Pipeline(load_rules(None), HeuristicJudge()), {**RECORD, "gold_sql": gold})
    assert result.reference is not None and result.reference.verdict is Verdict.INCORRECT
    found = {d.component: (d.generated, d.reference) for d in result.reference.differences}
    assert found["filters"] == ("country = 'France'", "country = 'Germany'")
    assert "aggregates" in found
    assert {"filters_incorrect", "aggregation_wrong"} <= set(result.issues)
    assert "none" not in result.issues
    assert result.score is not None and result.score < 75


def test_without_a_reference_the_result_has_no_reference_key() -> None:
    result = _judge(Pipeline(load_rules(None), HeuristicJudge()), RECORD)
    assert result.reference is None
    assert "reference" not in json.loads(result.to_json())


def test_a_reference_that_does_not_parse_changes_nothing_but_says_so() -> None:
    pipeline = Pipeline(load_rules(None), HeuristicJudge())
    without = _judge(pipeline, RECORD)
    result = _judge(pipeline, {**RECORD, "gold_sql": "SELEC nothing (("})
    assert result.reference is not None
    assert (result.reference.verdict, result.reference.error) == (None, "reference_unparsed")
    assert result.score == without.score


@pytest.mark.parametrize(
    ("sql", "gold_sql", "dialect", "error"),
    [
        ("SELECT a ? FROM t", "SELECT a FROM t", None, "generated_unparsed"),
        ("SELECT 1", "SELECT AND (*)", "clickhouse", "reference_unparsed"),
    ],
)
def test_sql_the_parser_fails_on_with_a_type_error_is_unparsed(
    sql: str, gold_sql: str, dialect: str | None, error: str
) -> None:
    """Before: sqlglot's TypeError on these ("Expr object expected; got None") made the
    record an internal_error dead letter in reference mode; without a reference it was judged."""
    record = {"question": "q?", "sql": sql, "gold_sql": gold_sql, "dialect": dialect}
    result = _judge(Pipeline(load_rules(None), HeuristicJudge()), record)
    assert result.reference is not None and result.reference.error == error


def test_unsafe_sql_keeps_its_zero_with_a_reference() -> None:
    record = {**RECORD, "sql": "DELETE FROM singer", "gold_sql": "DELETE FROM singer"}
    result = _judge(Pipeline(load_rules(None), HeuristicJudge()), record)
    assert result.score == 0.0 and result.reference is not None


def test_gold_sql_through_the_field_mapping() -> None:
    pipeline = build_pipeline(
        Settings(field_mapping={"gold_sql": "golden.query"}),
        load_rules(None),
        HeuristicJudge(),
    )
    record = {**RECORD, "golden": {"query": "SELECT name FROM singer"}}
    result = _judge(pipeline, record)
    assert result.reference is not None and result.reference.verdict is Verdict.INCORRECT


def test_the_heuristic_never_sees_the_reference() -> None:
    backend = Recording()
    gold = f"SELECT COUNT(*) FROM {SECRET}"
    _judge(Pipeline(load_rules(None), backend), {**RECORD, "gold_sql": gold})
    assert len(backend.seen) == 1
    assert backend.seen[0].record.gold_sql is None
    assert SECRET not in backend.seen[0].model_dump_json()


def test_references_file_matched_on_the_normalised_question(tmp_path: Path) -> None:
    refs = tmp_path / "refs.jsonl"
    line = {"question": "how many  SINGERS are from France? ", "gold_sql": "SELECT 1 FROM singer"}
    refs.write_text(json.dumps(line) + "\n\n", encoding="utf-8")
    settings = Settings(references=refs)
    pipeline = build_pipeline(settings, load_rules(None), build_backend(settings))
    result = _judge(pipeline, RECORD)
    assert result.reference is not None and result.reference.verdict is Verdict.INCORRECT
    # The record's own gold_sql wins over the file.
    own = "SELECT COUNT(*) FROM singer WHERE country = 'France'"
    result = _judge(pipeline, {**RECORD, "gold_sql": own})
    assert result.reference is not None and result.reference.verdict is Verdict.CORRECT
    other = _judge(pipeline, {**RECORD, "question": "Another question"})
    assert other.reference is None


@pytest.mark.parametrize(
    "content",
    [
        '{"question": "q"}\n',
        "not json\n",
        '["q", "SELECT 1"]\n',
        # Calls nested past what a parse survives (a record's own SQL is refused so too).
        json.dumps({"question": "q", "gold_sql": "SELECT " + "DATE(" * 22 + "1" + ")" * 22}) + "\n",
    ],
    ids=["no-gold", "not-json", "a-list", "nested-calls"],
)
def test_a_bad_references_file_fails_loudly_with_its_line(tmp_path: Path, content: str) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"question": "ok", "gold_sql": "SELECT 1"}\n' + content, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"refs\.jsonl:2"):
        load_references(refs, 50_000, max_question_chars=4_000)
    with pytest.raises(ConfigError, match="cannot be read"):
        load_references(tmp_path / "missing.jsonl", 50_000, max_question_chars=4_000)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # read at start: refused before an open that would block it
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_references(fifo, 50_000, max_question_chars=4_000)
