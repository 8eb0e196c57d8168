"""``llm.samples``: the model asked N times, the majority verdict taken, the agreement share in
the confidence, the cost summed, a split vote labelled, and the cache holding the vote."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from stef.judges.llm.cache import cache_key
from stef.judges.llm.judge import LlmJudge
from stef.judges.llm.samples import majority_verdict
from stef.metrics import Metrics
from stef.models import Result, Verdict
from stef.pipeline import Pipeline
from stef.rules import RuleSet
from stef.testing.fake_server import Error, FakeLlmServer, Reply
from tests.judges.llm.conftest import RECORD, request_for
from tests.judges.llm.replies import reply

Make = Callable[..., LlmJudge]
C, LC, PI, INC = (
    Verdict.CORRECT,
    Verdict.LIKELY_CORRECT,
    Verdict.POTENTIALLY_INCORRECT,
    Verdict.INCORRECT,
)


def _said(verdict: str, confidence: float) -> Reply:
    return Reply(
        reply(verdict=verdict, confidence=confidence), prompt_tokens=100, completion_tokens=10
    )


def _judged(pipeline: Pipeline, **changes: Any) -> Result:
    out = pipeline.process(json.dumps({**RECORD, **changes}).encode(), {"file": "-", "line": 1})
    assert out.result is not None
    return out.result


@pytest.fixture
def server() -> Iterator[FakeLlmServer]:
    """An endpoint without log-probabilities: these tests read the self-reported confidences
    the samples vote with (token probabilities vote the same way: test_majority_*)."""
    with FakeLlmServer(logprobs=False) as srv:
        yield srv


def _samples(registry: CollectorRegistry, outcome: str) -> float:
    labels = {"model": "judge-model", "outcome": outcome}
    return registry.get_sample_value("stef_judge_samples_total", labels) or 0.0


def test_a_split_vote_takes_the_majority_and_scales_the_confidence(
    judge_factory: Make,
    server: FakeLlmServer,
    rules: RuleSet,
    metrics: Metrics,
    registry: CollectorRegistry,
) -> None:
    server.script(_said("Correct", 0.9), _said("Incorrect", 0.8), _said("Correct", 0.8))
    judge = judge_factory(server, samples=3, temperature=0.7)
    result = _judged(Pipeline(rules, judge, metrics=metrics))
    assert result.outcome == "evaluated" and result.components is not None
    assert result.components.verdict is C
    # mean confidence of the two Correct samples (0.9, 0.8) x agreement 2/3
    assert result.components.confidence == round((0.9 + 0.8) / 2 * 2 / 3, 4) == 0.5667
    # below 0.65: the confidence multiplier halves the score
    assert result.components.confidence_multiplier == 0.5 and result.score == 50.0
    vote = result.judge.samples
    assert vote is not None
    assert (vote.n, vote.answered, vote.agreeing, vote.split) == (3, 3, 2, True)
    assert vote.verdicts == [C, INC, C]
    assert json.loads(result.to_json())["judge"]["samples"]["split"] is True
    # the cost of every sample: tokens and attempts summed, in the result and the metrics
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (300, 30)
    assert result.usage.attempts == 3
    chats = server.chat_requests()
    assert len(chats) == 3 and {r.body["temperature"] for r in chats} == {0.7}
    assert _samples(registry, "answered") == 3 and _samples(registry, "failed") == 0
    tokens = {"model": "judge-model", "kind": "prompt"}
    assert registry.get_sample_value("stef_llm_tokens_total", tokens) == 300
    split = registry.get_sample_value("stef_judge_split_verdicts_total", {"app": "sales"})
    assert split == 1


def test_a_unanimous_vote_is_not_split_and_keeps_the_mean_confidence(
    judge_factory: Make,
    server: FakeLlmServer,
    rules: RuleSet,
    metrics: Metrics,
    registry: CollectorRegistry,
) -> None:
    server.script(_said("Correct", 0.9), _said("Correct", 0.95), _said("Correct", 1.0))
    result = _judged(
        Pipeline(rules, judge_factory(server, samples=3, temperature=1.0), metrics=metrics)
    )
    assert result.components is not None and result.components.confidence == 0.95
    assert result.judge.samples is not None and not result.judge.samples.split
    assert result.judge.samples.agreeing == 3 and result.score == 100.0
    assert not registry.get_sample_value("stef_judge_split_verdicts_total", {"app": "sales"})


@pytest.mark.parametrize(
    ("verdicts", "winner"),
    [
        ([C], C),
        ([C, C, INC], C),
        ([C, INC], INC),  # a tie goes to the more severe verdict
        ([LC, PI, PI, LC], PI),
        ([C, LC, PI], PI),
        ([INC, C, C, LC, LC], LC),
    ],
)
def test_majority_verdict_and_its_tie_break(verdicts: list[Verdict], winner: Verdict) -> None:
    assert majority_verdict(verdicts) is winner


def test_failed_samples_leave_the_majority_of_the_answered(
    judge_factory: Make,
    server: FakeLlmServer,
    rules: RuleSet,
    metrics: Metrics,
    registry: CollectorRegistry,
) -> None:
    # 401 is not retried: the second sample fails after one call.
    server.script(_said("Correct", 0.9), Error(401), _said("Incorrect", 0.6))
    judge = judge_factory(server, samples=3, temperature=0.7)
    result = _judged(Pipeline(rules, judge, metrics=metrics))
    assert result.outcome == "evaluated" and result.components is not None
    # one Correct, one Incorrect answered: the tie goes to Incorrect, agreement 1/2
    assert result.components.verdict is INC and result.components.confidence == 0.3
    vote = result.judge.samples
    assert vote is not None and (vote.n, vote.answered, vote.agreeing) == (3, 2, 1)
    assert result.usage.attempts == 3 and result.usage.prompt_tokens == 200
    assert _samples(registry, "answered") == 2 and _samples(registry, "failed") == 1


def test_judge_error_only_when_no_sample_answers(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet, metrics: Metrics
) -> None:
    server.script(Error(401), Error(401), Error(401))
    judge = judge_factory(server, samples=3, temperature=0.7)
    result = _judged(Pipeline(rules, judge, metrics=metrics))
    assert result.outcome == "judge_error" and result.score is None
    assert result.error is not None and result.error.startswith("http_401:")
    assert result.usage.attempts == 3


def test_the_cache_serves_the_vote_not_one_sample(
    judge_factory: Make, server: FakeLlmServer, rules: RuleSet
) -> None:
    server.script(_said("Correct", 0.9), _said("Incorrect", 0.8), _said("Correct", 0.8))
    pipeline = Pipeline(rules, judge_factory(server, samples=3, temperature=0.7))
    first = _judged(pipeline, id="first")
    again = _judged(pipeline, id="again")
    assert len(server.chat_requests()) == 3  # the second record asked nothing
    assert again.usage.cache_hit and not first.usage.cache_hit
    assert again.judge.samples == first.judge.samples and again.score == first.score == 50.0


def test_the_sample_count_is_part_of_the_cache_key() -> None:
    request = request_for(RECORD)
    keys = {
        n: cache_key(request, prompt_version="v", model="m", analysis={}, samples=n)
        for n in (1, 3, 5)
    }
    assert len(set(keys.values())) == 3
    # one sample keeps the key entries were stored under before samples existed
    assert keys[1] == cache_key(request, prompt_version="v", model="m", analysis={})


def test_samples_at_temperature_zero_are_warned_about(
    judge_factory: Make, server: FakeLlmServer
) -> None:
    with capture_logs() as logs:
        judge_factory(server, samples=3)
    assert any(e["event"] == "llm_samples_at_temperature_zero" for e in logs)
    with capture_logs() as quiet:
        judge_factory(server, samples=3, temperature=0.5)
        judge_factory(server)
    assert not any(e["event"] == "llm_samples_at_temperature_zero" for e in quiet)


def test_one_sample_is_the_judgment_as_before(
    judge: LlmJudge, server: FakeLlmServer, rules: RuleSet, registry: CollectorRegistry
) -> None:
    server.script(_said("Likely Correct", 0.7))
    result = _judged(Pipeline(rules, judge))
    assert result.components is not None and result.components.confidence == 0.7
    assert result.judge.samples is None and "samples" not in json.loads(result.to_json())["judge"]
    assert len(server.chat_requests()) == 1
    assert _samples(registry, "answered") == 1


def test_majority_token_probability_votes_like_the_confidence() -> None:
    from stef.judges.llm.samples import majority
    from stef.models import Enrichment, EnrichmentStatus, JudgeOutput, QuestionSpec

    def said(verdict: Verdict, confidence: float, p: float | None) -> JudgeOutput:
        return JudgeOutput(
            question_spec=QuestionSpec(),
            filter_matches=[],
            enrichment=Enrichment(status=EnrichmentStatus.FAITHFUL),
            verdict=verdict,
            confidence=confidence,
            token_probability=p,
        )

    voted = majority([said(C, 0.9, 0.9), said(INC, 0.8, 0.2), said(C, 0.8, 0.8)], asked=3)
    # mean of the majority (0.85), pulled toward 0.5 by the 1/3 that disagreed
    assert voted.token_probability == round(0.5 + (0.85 - 0.5) * 2 / 3, 4)
    assert majority([said(C, 0.9, None), said(C, 0.9, 0.9)], asked=2).token_probability is None
