"""The pipeline: judge errors are outcomes (never a score), sampling is deterministic."""

from __future__ import annotations

from stef.errors import LlmReplyError
from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo
from stef.pipeline import Pipeline, sampled_in
from stef.rules import AppRules, RuleSet
from stef.stages.validate import validate


class FailingJudge:
    """A backend that can never decide."""

    @property
    def info(self) -> JudgeInfo:
        return JudgeInfo(backend="failing")

    def judge(self, request: JudgeRequest) -> JudgeReply:
        raise LlmReplyError("invalid_reply", "schema violated twice", attempts=2, raw="{}")


def test_judge_error_has_no_score() -> None:
    pipe = Pipeline(RuleSet(AppRules()), FailingJudge())
    r = pipe.judge_record(validate({"question": "q", "sql": "SELECT 1"}))
    assert r.outcome == "judge_error"
    assert r.score is None and r.tier is None and r.components is None
    assert r.error == "invalid_reply: schema violated twice"
    assert r.usage.attempts == 2
    assert r.sql_spec is not None and r.sql_spec.parsed


def test_sampling_is_deterministic_and_near_the_rate() -> None:
    ids = [f"id-{i}" for i in range(4000)]
    picked = [i for i in ids if sampled_in(i, 0.25)]
    assert picked == [i for i in ids if sampled_in(i, 0.25)]
    assert 0.22 < len(picked) / len(ids) < 0.28
    assert all(sampled_in(i, 1.0) for i in ids[:10])
    assert not any(sampled_in(i, 0.0) for i in ids[:10])


def test_skipped_sampling_result() -> None:
    pipe = Pipeline(RuleSet(AppRules(sampling_rate=0.0)), FailingJudge())
    r = pipe.judge_record(validate({"question": "q", "sql": "SELECT 1"}))
    assert r.outcome == "skipped_sampling" and r.score is None


def test_rules_callable_is_read_per_record() -> None:
    current = {"rules": RuleSet(AppRules(limit_min=10))}
    from stef.judges.heuristic.judge import HeuristicJudge

    pipe = Pipeline(lambda: current["rules"], HeuristicJudge())
    rec = validate({"question": "list users", "sql": "SELECT * FROM u LIMIT 50"})
    assert "safety_limit" in pipe.judge_record(rec).normalizations
    current["rules"] = RuleSet(AppRules(limit_min=100))
    assert "limit_below_min" in pipe.judge_record(rec).flags


class _FailingJudge(HeuristicJudge):
    def judge(self, request: JudgeRequest) -> JudgeReply:
        raise LlmReplyError("invalid_reply", "the model said nothing usable", attempts=2)


def test_safety_holds_when_the_judge_fails() -> None:
    pipeline = Pipeline(RuleSet(AppRules()), _FailingJudge())
    unsafe = pipeline.judge_record(validate({"question": "Drop it", "sql": "DROP TABLE orders"}))
    assert (unsafe.outcome, unsafe.score, unsafe.tier) == ("evaluated", 0.0, "poor")
    assert unsafe.components is not None and unsafe.components.verdict == "Incorrect"
    assert unsafe.issues == ["unsafe_sql"] and "safety_override" in unsafe.normalizations
    assert unsafe.error is not None and unsafe.error.startswith("invalid_reply")
    safe = pipeline.judge_record(
        validate({"question": "How many?", "sql": "SELECT COUNT(*) FROM o"})
    )
    assert (safe.outcome, safe.score) == ("judge_error", None)


def test_text_that_is_not_sql_is_verdict_incorrect() -> None:
    pipeline = Pipeline(RuleSet(AppRules()), HeuristicJudge())
    prose = pipeline.judge_record(validate({"question": "How many orders?", "sql": "hello world"}))
    assert prose.components is not None and prose.components.verdict == "Incorrect"
    assert "not_sql_override" in prose.normalizations and prose.tier == "poor"
    # SQL sqlglot cannot parse (a typo, another dialect) is still SQL: judged, not overridden.
    typo = pipeline.judge_record(validate({"question": "How many?", "sql": "selec * from t"}))
    assert "not_sql_override" not in typo.normalizations
