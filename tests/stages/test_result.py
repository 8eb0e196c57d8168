"""Result assembly (stef.stages.result): every outcome carries the record's labels and the SQL's
safety; the two evaluated kinds (with and without a judge) go through one scorer, so unsafe SQL
gets the same score, tier and override whether the judge answered or failed."""

from __future__ import annotations

import time

from stef.errors import JudgeError
from stef.judges.base import JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.models import JudgeInfo, Usage, Verdict
from stef.pipeline import judge_request
from stef.rules import AppRules
from stef.stages.normalize import Normalized
from stef.stages.result import SAFETY_OVERRIDE, ResultBuilder
from stef.stages.validate import validate

RULES = AppRules()
INFO = JudgeInfo(backend="llm", model="m")
UNSAFE = {
    "id": "u1",
    "app": "sales",
    "agent": "bot",
    "agent_version": "2",
    "question": "Remove the orders of 2020",
    "sql": "DELETE FROM orders WHERE year = 2020",
}


def _builder(record: dict[str, str]) -> tuple[ResultBuilder, JudgeRequest, Normalized]:
    valid = validate(record)
    request, norm = judge_request(valid, RULES)
    return ResultBuilder(valid, INFO, request.sql_spec), request, norm


def test_every_outcome_carries_the_labels_and_the_safety_check() -> None:
    builder, _, norm = _builder(UNSAFE)
    failure = JudgeError("timeout", "no reply in 30 s", attempts=3)
    started = time.perf_counter()
    results = [
        builder.sampled_out(),
        builder.judge_error(failure, norm, started),
        builder.unsafe_without_judge(failure, norm, RULES, started),
    ]
    assert [r.outcome for r in results] == ["skipped_sampling", "judge_error", "evaluated"]
    for r in results:
        assert (r.id, r.app, r.agent, r.agent_version, r.judge) == ("u1", "sales", "bot", "2", INFO)
        assert r.safety.mutating
    assert results[1].score is None and results[1].usage.attempts == 3
    assert results[1].error == results[2].error == "timeout: no reply in 30 s"


def test_unsafe_sql_scores_the_same_with_or_without_a_judge() -> None:
    builder, request, norm = _builder(UNSAFE)
    answer = HeuristicJudge().judge(request).output
    answer = answer.model_copy(update={"verdict": Verdict.CORRECT, "confidence": 1.0})
    judged = builder.evaluated(answer, norm, RULES, Usage(latency_ms=1.0), [])
    failure = JudgeError("timeout", "no reply", attempts=1)
    alone = builder.unsafe_without_judge(failure, norm, RULES, time.perf_counter())
    for r in (judged, alone):
        assert r.outcome == "evaluated" and r.score == 0 and r.tier == "poor"
        assert r.components is not None and r.components.verdict is Verdict.INCORRECT
        assert r.normalizations[-1] == SAFETY_OVERRIDE
        assert "unsafe_sql" in r.issues
        assert r.rationale is not None and r.rationale.startswith("Unsafe SQL:")
