"""The hooks seam (issue 36 §2): an observer added to ``LlmJudge.hooks`` sees every HTTP attempt
(retried, answered, failed: time, tokens, cost), every call that answered and every call that
failed, as the metrics and the model watch see them."""

from __future__ import annotations

from collections.abc import Callable

from stef.errors import JudgeError
from stef.judges.llm.hooks import Attempt
from stef.judges.llm.judge import LlmJudge
from stef.judges.llm.wire import Completion
from stef.pipeline import Pipeline
from stef.testing.fake_server import Error, FakeLlmServer, Reply
from tests.judges.llm.conftest import make_record
from tests.judges.llm.replies import reply

PRICES = {"judge-model": {"prompt": 1.0, "completion": 2.0}}


def test_an_observer_sees_attempts_answers_and_failures(
    server: FakeLlmServer,
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    judge = judge_factory(server, prices=PRICES, max_retries=1)
    attempts: list[Attempt] = []
    answered: list[Completion] = []
    failed: list[JudgeError] = []
    judge.hooks.attempts.append(attempts.append)
    judge.hooks.completions.append(answered.append)
    judge.hooks.failures.append(failed.append)
    pipeline = pipeline_for(judge)

    server.script(Error(503), Reply(reply(), prompt_tokens=1000, completion_tokens=100))
    assert pipeline.judge_record(make_record(id="retried")).outcome == "evaluated"
    assert [a.outcome for a in attempts] == ["retry", "ok"]
    ok = attempts[-1]
    assert (ok.model, ok.prompt_tokens, ok.completion_tokens) == ("judge-model", 1000, 100)
    assert ok.cost_usd is not None and abs(ok.cost_usd - (1000 * 1.0 + 100 * 2.0) / 1e6) < 1e-12
    assert all(a.seconds >= 0 for a in attempts) and attempts[0].cost_usd is None
    assert len(answered) == 1 and answered[0].prompt_tokens == 1000 and not failed

    server.script(Error(500), Error(500))
    result = pipeline.judge_record(make_record(id="failed", question="Spend in EMEA?"))
    assert result.outcome == "judge_error"
    assert [a.outcome for a in attempts[2:]] == ["retry", "error"]
    assert len(failed) == 1 and failed[0].reason == "http_500" and len(answered) == 1


def test_the_model_watch_listens_on_the_same_seam(
    server: FakeLlmServer,
    judge_factory: Callable[..., LlmJudge],
    pipeline_for: Callable[[LlmJudge], Pipeline],
) -> None:
    judge = judge_factory(server)
    server.script(Reply(reply(), model="judge-model-2024-11"))
    pipeline_for(judge).judge_record(make_record(id="named"))
    assert judge.model_watch.last == "judge-model-2024-11"
