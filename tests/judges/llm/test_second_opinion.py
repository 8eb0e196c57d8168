"""The heuristic's second opinion on every record the LLM judged: kept beside the LLM's verdict,
disagreements on pass/fail counted, never able to change or break the LLM's result."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.judges.base import JudgeReply, JudgeRequest
from stef.judges.heuristic.judge import HeuristicJudge
from stef.judges.llm.judge import LlmJudge
from stef.metrics import Metrics
from stef.models import Verdict
from stef.pipeline import Pipeline, PipelineOptions
from stef.rules import RuleSet
from stef.service.wiring import build_backend, build_pipeline
from stef.settings import load_settings
from stef.testing.fake_server import FakeLlmServer, Reply
from tests.judges.llm.conftest import RECORD
from tests.judges.llm.replies import filt, reply

Make = Callable[..., LlmJudge]
WRONG_YEAR_SQL = "SELECT SUM(spend) AS total_spend FROM sales WHERE region = 'APAC' AND year = 2022"
WRONG_YEAR = reply(
    filters=[filt("for 2023", "2023", "mismatched", [2], lhs="year")],
    verdict="Potentially Incorrect",
    confidence=0.9,
)


def _payload(**changes: Any) -> bytes:
    return json.dumps({**RECORD, **changes}).encode()


def _count(registry: CollectorRegistry, name: str, app: str = "sales") -> float:
    return registry.get_sample_value(name, {"app": app}) or 0.0


@pytest.fixture
def pipeline(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet, metrics: Metrics
) -> Pipeline:
    # No cache: every record asks the server, so each takes its scripted step.
    return Pipeline(
        rules,
        judge_factory(server, cache_size=0),
        PipelineOptions(second_opinion=HeuristicJudge()),
        metrics=metrics,
    )


def test_disagreement_counts_where_the_llm_and_the_heuristic_differ(
    pipeline: Pipeline, server: FakeLlmServer, registry: CollectorRegistry
) -> None:
    # The heuristic passes the typical record (Correct) and fails the wrong year (Potentially
    # Incorrect); the scripted LLM agrees on the first and third, not on the second and fourth.
    server.script(
        Reply(reply(verdict="Correct")),
        Reply(reply(verdict="Incorrect", confidence=0.9)),
        Reply(WRONG_YEAR),
        Reply(reply(verdict="Likely Correct", confidence=0.9)),
    )
    cases = [
        _payload(id="a"),
        _payload(id="b"),
        _payload(id="c", sql=WRONG_YEAR_SQL),
        _payload(id="d", sql=WRONG_YEAR_SQL),
    ]
    results = [pipeline.process(p, {"file": "-", "line": i}).result for i, p in enumerate(cases)]
    assert server.pending == 0
    seconds = {}
    for r in results:
        assert r is not None and r.outcome == "evaluated" and r.components is not None
        assert r.judge.backend == "llm" and r.judge.second_opinion is not None
        seconds[r.id] = (r.components.verdict, r.judge.second_opinion)
    assert {k: (v[0], v[1].verdict, v[1].agrees) for k, v in seconds.items()} == {
        "a": (Verdict.CORRECT, Verdict.CORRECT, True),
        "b": (Verdict.INCORRECT, Verdict.CORRECT, False),
        "c": (Verdict.POTENTIALLY_INCORRECT, Verdict.POTENTIALLY_INCORRECT, True),
        "d": (Verdict.LIKELY_CORRECT, Verdict.POTENTIALLY_INCORRECT, False),
    }
    assert all(v[1].backend == "heuristic" and 0 < v[1].confidence <= 1 for v in seconds.values())
    assert _count(registry, "stef_judge_second_opinions_total") == 4
    assert _count(registry, "stef_judge_disagreement_total") == 2
    # The JSON carries it under judge.
    assert results[1] is not None
    judge = json.loads(results[1].to_json())["judge"]
    assert judge["second_opinion"] == {
        "backend": "heuristic",
        "verdict": "Correct",
        "confidence": 0.9,
        "agrees": False,
    }


def test_the_second_opinion_never_changes_the_llm_result(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet, metrics: Metrics
) -> None:
    scripted = reply(verdict="Incorrect", confidence=0.9)
    server.script(Reply(scripted), Reply(scripted))
    judge = judge_factory(server, cache_size=0)
    alone = Pipeline(rules, judge).process(_payload(id="x"), {"file": "-", "line": 1}).result
    both = Pipeline(rules, judge, PipelineOptions(second_opinion=HeuristicJudge())).process(
        _payload(id="x"), {"file": "-", "line": 1}
    )
    assert alone is not None and both.result is not None
    assert both.result.judge.second_opinion is not None
    without = both.result.model_copy(
        update={"judge": both.result.judge.model_copy(update={"second_opinion": None})}
    )
    assert without.model_dump(exclude={"usage"}) == alone.model_dump(exclude={"usage"})


class _BrokenHeuristic(HeuristicJudge):
    """A second opinion with a bug."""

    def judge(self, request: JudgeRequest) -> JudgeReply:
        raise KeyError("a bug in the heuristic")


def test_a_failing_second_opinion_is_logged_counted_and_harmless(
    judge_factory: Make,
    server: FakeLlmServer,
    rules: RuleSet,
    metrics: Metrics,
    registry: CollectorRegistry,
) -> None:
    server.script(Reply(reply(verdict="Correct")))
    pipe = Pipeline(
        rules,
        judge_factory(server, cache_size=0),
        PipelineOptions(second_opinion=_BrokenHeuristic()),
        metrics=metrics,
    )
    with capture_logs() as logs:
        out = pipe.process(_payload(id="y"), {"file": "-", "line": 1})
    assert out.result is not None and out.result.outcome == "evaluated"
    assert out.result.score == 100.0 and out.result.judge.second_opinion is None
    assert "second_opinion" not in json.loads(out.value)["judge"]
    assert registry.get_sample_value("stef_judge_second_opinion_errors_total") == 1
    assert _count(registry, "stef_judge_second_opinions_total") == 0
    failed = [e for e in logs if e["event"] == "second_opinion_failed"]
    assert failed and failed[0]["error_type"] == "KeyError" and failed[0]["id"] == "y"


def test_no_second_opinion_on_a_judge_error_or_unsafe_sql_without_a_judge(
    pipeline: Pipeline, server: FakeLlmServer, registry: CollectorRegistry
) -> None:
    server.script(*[Reply("not json")] * 4)
    out = pipeline.process(_payload(id="e"), {"file": "-", "line": 1})
    assert out.result is not None and out.result.outcome == "judge_error"
    assert out.result.judge.second_opinion is None
    # Unsafe SQL whose judge failed is evaluated by the safety override alone: no LLM verdict.
    unsafe = pipeline.process(_payload(id="u", sql="DELETE FROM sales"), {"file": "-", "line": 2})
    assert unsafe.result is not None and unsafe.result.outcome == "evaluated"
    assert unsafe.result.error and unsafe.result.judge.second_opinion is None
    assert server.pending == 0
    assert _count(registry, "stef_judge_second_opinions_total") == 0
    assert (
        registry.get_sample_value("stef_records_total", {"app": "sales", "outcome": "judge_error"})
        == 1
    )


def test_wiring_adds_the_heuristic_beside_the_llm_unless_turned_off(server: FakeLlmServer) -> None:
    env = {"STEF_LLM_BASE_URL": server.base_url, "STEF_LLM_MODEL": "judge-model"}
    rules = RuleSet.__new__(RuleSet)  # not read: nothing is judged here
    on = load_settings(None, None, env=env)
    backend = build_backend(on)
    try:
        second = build_pipeline(on, rules, backend).options.second_opinion
        assert isinstance(second, HeuristicJudge)
        off = load_settings(None, None, env={**env, "STEF_LLM_SECOND_OPINION": "false"})
        assert build_pipeline(off, rules, backend).options.second_opinion is None
    finally:
        backend.close()
    heuristic = load_settings(None, None, env={})
    assert build_pipeline(heuristic, rules, build_backend(heuristic)).options.second_opinion is None


def test_a_heuristic_run_keeps_its_result_json(rules: RuleSet) -> None:
    out = Pipeline(rules, HeuristicJudge()).process(_payload(id="h"), {"file": "-", "line": 1})
    judge = json.loads(out.value)["judge"]
    assert set(judge) == {"backend", "model", "prompt_version", "rules_version"}


def test_both_verdicts_are_compared_after_the_overrides(
    pipeline: Pipeline, server: FakeLlmServer, registry: CollectorRegistry
) -> None:
    # Prose in place of SQL is Incorrect whatever a judge says: the LLM's Correct and the
    # heuristic's Potentially Incorrect both become Incorrect, so they agree.
    server.script(Reply(reply(verdict="Correct")))
    out = pipeline.process(_payload(id="p", sql="hello world"), {"file": "-", "line": 1})
    assert out.result is not None and out.result.components is not None
    assert out.result.components.verdict is Verdict.INCORRECT
    second = out.result.judge.second_opinion
    assert second is not None and second.verdict is Verdict.INCORRECT and second.agrees
    assert _count(registry, "stef_judge_disagreement_total") == 0
